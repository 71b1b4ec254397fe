//! The filter's tokens, each with the column it starts at.

use super::FilterError;

/// A token of a filter expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Tok {
    /// A name, number, address or range (`host`, `53`, `198.18.0.0/15`, `1-9`).
    Word(String),
    /// `(`
    Open,
    /// `)`
    Close,
    /// `!` or `not` (the word form stays a `Word` until the parser reads it).
    Bang,
    /// `&&`
    AndAnd,
    /// `||`
    OrOr,
    /// `<`, `<=`, `>`, `>=`, `=`, `==`, `!=`
    Rel(Rel),
}

/// A comparison of `len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rel {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

/// A token and the byte offset it starts at.
#[derive(Debug, Clone)]
pub(super) struct Spanned {
    pub tok: Tok,
    pub at: usize,
    pub end: usize,
}

fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '-' | '_' | '\\')
}

/// Splits `text` into tokens.
pub(super) fn lex(text: &str) -> Result<Vec<Spanned>, FilterError> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = text[i..].chars().next().unwrap_or(' ');
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let two = text.get(i..i + 2).unwrap_or("");
        let (tok, len) = match (c, two) {
            (_, "&&") => (Tok::AndAnd, 2),
            (_, "||") => (Tok::OrOr, 2),
            (_, "<=") => (Tok::Rel(Rel::Le), 2),
            (_, ">=") => (Tok::Rel(Rel::Ge), 2),
            (_, "==") => (Tok::Rel(Rel::Eq), 2),
            (_, "!=") => (Tok::Rel(Rel::Ne), 2),
            ('<', _) => (Tok::Rel(Rel::Lt), 1),
            ('>', _) => (Tok::Rel(Rel::Gt), 1),
            ('=', _) => (Tok::Rel(Rel::Eq), 1),
            ('!', _) => (Tok::Bang, 1),
            ('(', _) => (Tok::Open, 1),
            (')', _) => (Tok::Close, 1),
            _ if word_char(c) => {
                let n = text[i..]
                    .char_indices()
                    .find(|&(_, c)| !word_char(c))
                    .map_or(text.len() - i, |(k, _)| k);
                (Tok::Word(text[i..i + n].to_string()), n)
            }
            _ => {
                return Err(FilterError::at(
                    text,
                    i,
                    format!("unexpected character {c:?}"),
                ))
            }
        };
        out.push(Spanned {
            tok,
            at: i,
            end: i + len,
        });
        i += len;
    }
    Ok(out)
}
