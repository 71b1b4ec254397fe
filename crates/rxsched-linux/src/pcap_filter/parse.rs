//! The parser: pcap-filter's grammar for the subset rxsched reads, with
//! libpcap's rules where they surprise (see the module notes of
//! [`super`]): `and` and `or` bind equally, left to right; a bare value
//! after `and`, `or` or `not` takes the qualifiers of the primitive
//! before it; each `vlan` moves every later primitive 4 bytes on.

use super::lex::{lex, Rel, Spanned, Tok};
use super::lower::{self, Dir, Kind, Proto, Quals};
use super::{FilterError, Node};

/// A parsed expression: primitives already lowered to their tests, with
/// where each part sits in the text (to say where each part runs).
#[derive(Debug, Clone)]
pub(super) struct Expr {
    pub kind: ExprKind,
    pub at: usize,
    pub end: usize,
    /// It was written in parentheses (its span includes them).
    pub paren: bool,
}

#[derive(Debug, Clone)]
pub(super) enum ExprKind {
    Prim(Node),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

impl Expr {
    /// The tests it stands for.
    pub fn node(&self) -> Node {
        match &self.kind {
            ExprKind::Prim(n) => n.clone(),
            ExprKind::Not(e) => Node::Not(Box::new(e.node())),
            ExprKind::And(a, b) => Node::And(Box::new(a.node()), Box::new(b.node())),
            ExprKind::Or(a, b) => Node::Or(Box::new(a.node()), Box::new(b.node())),
        }
    }

    /// The conjuncts of a top-level chain of `and`s, in order.
    pub fn conjuncts(&self) -> Vec<&Expr> {
        match &self.kind {
            ExprKind::And(a, b) if !self.paren => {
                let mut v = a.conjuncts();
                v.extend(b.conjuncts());
                v
            }
            _ => vec![self],
        }
    }

    /// Its text, in parentheses where joining it to others with `and`
    /// would change its meaning.
    pub fn text<'t>(&self, src: &'t str) -> std::borrow::Cow<'t, str> {
        let t = &src[self.at..self.end];
        match self.kind {
            ExprKind::And(..) | ExprKind::Or(..) if !self.paren => format!("({t})").into(),
            _ => t.into(),
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    toks: Vec<Spanned>,
    pos: usize,
    /// Bytes every later primitive's headers sit past their usual place
    /// (4 for each `vlan` read so far).
    shift: u16,
    /// The qualifiers a bare value takes (`None`: a bare value is an error).
    q: Option<Quals>,
}

/// Parses `text`.
pub(super) fn parse(text: &str) -> Result<Expr, FilterError> {
    let toks = lex(text)?;
    if toks.is_empty() {
        return Err(FilterError::at(text, 0, "empty expression".into()));
    }
    let mut p = Parser {
        text,
        toks,
        pos: 0,
        shift: 0,
        q: None,
    };
    let e = p.expr()?;
    if let Some(t) = p.toks.get(p.pos) {
        let what = match &t.tok {
            Tok::Close => "a `)` without its `(`".to_string(),
            _ => format!("`{}`: expected `and`, `or` or the end", &text[t.at..t.end]),
        };
        return Err(FilterError::at(text, t.at, what));
    }
    Ok(e)
}

fn word(t: Option<&Spanned>) -> Option<&str> {
    match t {
        Some(Spanned {
            tok: Tok::Word(w), ..
        }) => Some(w.as_str()),
        _ => None,
    }
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Spanned> {
        self.toks.get(self.pos)
    }

    fn peek_word(&self) -> Option<&str> {
        word(self.peek())
    }

    fn here(&self) -> usize {
        self.peek().map_or(self.text.len(), |t| t.at)
    }

    fn last_end(&self) -> usize {
        self.pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .map_or(0, |t| t.end)
    }

    fn err<T>(&self, at: usize, what: impl Into<String>) -> Result<T, FilterError> {
        Err(FilterError::at(self.text, at, what.into()))
    }

    fn expr(&mut self) -> Result<Expr, FilterError> {
        let mut left = self.unary()?;
        loop {
            let and = match (&self.peek().map(|t| &t.tok), self.peek_word()) {
                (Some(Tok::AndAnd), _) | (_, Some("and")) => true,
                (Some(Tok::OrOr), _) | (_, Some("or")) => false,
                _ => break,
            };
            self.pos += 1;
            let right = self.unary()?;
            let (at, end) = (left.at, right.end);
            let (a, b) = (Box::new(left), Box::new(right));
            left = Expr {
                kind: if and {
                    ExprKind::And(a, b)
                } else {
                    ExprKind::Or(a, b)
                },
                at,
                end,
                paren: false,
            };
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, FilterError> {
        let at = self.here();
        match self.peek().map(|t| t.tok.clone()) {
            None => self.err(at, "the expression ends where a primitive should be"),
            Some(Tok::Bang) => self.not(at),
            Some(Tok::Word(w)) if w == "not" => self.not(at),
            Some(Tok::Open) => {
                self.pos += 1;
                let before = self.q;
                let mut e = self.expr()?;
                if !matches!(self.peek().map(|t| &t.tok), Some(Tok::Close)) {
                    return self.err(self.here(), "expected `)`");
                }
                self.pos += 1;
                self.q = before;
                e.at = at;
                e.end = self.last_end();
                e.paren = true;
                Ok(e)
            }
            Some(Tok::Word(_)) => self.primitive(),
            Some(_) => self.err(
                at,
                format!(
                    "`{}`: expected a primitive",
                    &self.text[at..self.toks[self.pos].end]
                ),
            ),
        }
    }

    fn not(&mut self, at: usize) -> Result<Expr, FilterError> {
        self.pos += 1;
        let e = self.unary()?;
        let end = e.end;
        Ok(Expr {
            kind: ExprKind::Not(Box::new(e)),
            at,
            end,
            paren: false,
        })
    }

    fn prim(&self, node: Node, at: usize) -> Expr {
        Expr {
            kind: ExprKind::Prim(node),
            at,
            end: self.last_end(),
            paren: false,
        }
    }

    /// A number after a keyword (`vlan 5`, `less 100`).
    fn number(&mut self, what: &str, max: u32) -> Result<u32, FilterError> {
        let at = self.here();
        match self.peek_word().map(parse_num) {
            Some(Some(n)) if n <= max => {
                self.pos += 1;
                Ok(n)
            }
            Some(Some(n)) => self.err(at, format!("{what} {n} is over {max}")),
            _ => self.err(at, format!("expected {what} (a number)")),
        }
    }

    fn primitive(&mut self) -> Result<Expr, FilterError> {
        let at = self.here();
        let w = self.peek_word().unwrap_or_default().to_string();
        let (s, l2) = (self.shift, lower::L2 { shift: self.shift });
        match w.as_str() {
            "and" | "or" => return self.err(at, format!("`{w}` where a primitive should be")),
            "vlan" => {
                self.pos += 1;
                let id = match self.peek_word().map(parse_num) {
                    Some(Some(_)) => Some(self.number("a VLAN id", 4095)? as u16),
                    _ => None,
                };
                self.shift = s + 4;
                self.q = None;
                return Ok(self.prim(lower::vlan(l2, id), at));
            }
            "len" => {
                self.pos += 1;
                let rel = match self.peek().map(|t| &t.tok) {
                    Some(Tok::Rel(r)) => *r,
                    _ => {
                        return self.err(
                            self.here(),
                            "expected a comparison after `len` (<, <=, >, >=, ==, !=)",
                        )
                    }
                };
                self.pos += 1;
                let n = self.number("a length", u32::MAX)?;
                self.q = None;
                return Ok(self.prim(lower::len(rel, n), at));
            }
            "less" | "greater" => {
                self.pos += 1;
                let n = self.number("a length", u32::MAX)?;
                let rel = if w == "less" { Rel::Le } else { Rel::Ge };
                self.q = None;
                return Ok(self.prim(lower::len(rel, n), at));
            }
            "proto" => {
                self.pos += 1;
                let v = self.proto_number()?;
                self.q = None;
                return Ok(self.prim(lower::ip_proto(l2, None, v), at));
            }
            _ => {}
        }
        let proto = Proto::of(&w);
        if let Some(p) = proto {
            self.pos += 1;
            if matches!(p, Proto::Ip | Proto::Ip6) && self.peek_word() == Some("proto") {
                self.pos += 1;
                let v = self.proto_number()?;
                self.q = None;
                return Ok(self.prim(lower::ip_proto(l2, Some(p), v), at));
            }
        }
        let dir = self.dir()?;
        let kind = match self.peek_word().and_then(Kind::of) {
            Some(k) => {
                self.pos += 1;
                Some(k)
            }
            None => None,
        };
        let q = match (proto, dir, kind) {
            (Some(p), None, None) => {
                self.q = None;
                return match lower::proto_alone(l2, p) {
                    Some(n) => Ok(self.prim(n, at)),
                    None => self.err(at, format!("`{w}` needs `host`, `src` or `dst` and an address")),
                };
            }
            (None, None, None) => match self.q {
                Some(q) => q,
                None if self.pos == 0 => {
                    return self.err(at, format!("`{w}`: expected a primitive (host, net, port, portrange, a protocol, vlan, len)"))
                }
                None => {
                    return self.err(at, format!("`{w}` has no qualifier to take from the primitive before it: say `host {w}`, `port {w}`, ..."))
                }
            },
            _ => Quals { proto, dir, kind },
        };
        self.q = Some(q);
        let vat = self.here();
        let Some(value) = self.peek_word().map(str::to_string) else {
            return self.err(vat, "expected an address, network or port");
        };
        if matches!(value.as_str(), "and" | "or" | "not") {
            return self.err(
                vat,
                format!("`{value}` where an address, network or port should be"),
            );
        }
        self.pos += 1;
        let mask = if q.kind == Some(Kind::Net) && self.peek_word() == Some("mask") {
            self.pos += 1;
            let mat = self.here();
            match self.peek_word().map(str::to_string) {
                Some(m) => {
                    self.pos += 1;
                    Some((m, mat))
                }
                None => return self.err(mat, "expected a netmask after `mask`"),
            }
        } else {
            None
        };
        let node = lower::id(l2, q, &value, mask.as_ref().map(|(m, _)| m.as_str())).map_err(
            |(part, what)| {
                let at = if part == lower::Part::Mask {
                    mask.as_ref().map_or(vat, |(_, a)| *a)
                } else if part == lower::Part::Qualifier {
                    at
                } else {
                    vat
                };
                FilterError::at(self.text, at, what)
            },
        )?;
        Ok(self.prim(node, at))
    }

    /// `src`, `dst`, `src or dst`, `src and dst` (or none).
    fn dir(&mut self) -> Result<Option<Dir>, FilterError> {
        let first = match self.peek_word() {
            Some("src") => Dir::Src,
            Some("dst") => Dir::Dst,
            _ => return Ok(None),
        };
        self.pos += 1;
        let other = match first {
            Dir::Src => "dst",
            _ => "src",
        };
        let joined = match self.peek_word() {
            Some("or") => Dir::Either,
            Some("and") => Dir::Both,
            _ => return Ok(Some(first)),
        };
        if word(self.toks.get(self.pos + 1)) == Some(other) {
            self.pos += 2;
            return Ok(Some(joined));
        }
        Ok(Some(first))
    }

    /// An IP protocol: a number, or `\tcp`, `\udp`, `\icmp`, ...
    fn proto_number(&mut self) -> Result<u8, FilterError> {
        let at = self.here();
        let w = self.peek_word().unwrap_or_default();
        let v = match w.strip_prefix('\\').unwrap_or(w) {
            "tcp" => Some(6),
            "udp" => Some(17),
            "icmp" => Some(1),
            "icmp6" => Some(58),
            "sctp" => Some(132),
            n => parse_num(n).and_then(|n| u8::try_from(n).ok()),
        };
        match v {
            Some(v) if !w.is_empty() => {
                self.pos += 1;
                Ok(v)
            }
            _ => self.err(
                at,
                "expected a protocol: a number 0-255 or \\tcp, \\udp, \\icmp, \\icmp6, \\sctp",
            ),
        }
    }
}

/// A number as libpcap reads one: decimal, `0x` hexadecimal or `0` octal.
pub(super) fn parse_num(w: &str) -> Option<u32> {
    if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()
    } else if w.len() > 1 && w.starts_with('0') {
        u32::from_str_radix(&w[1..], 8).ok()
    } else {
        w.parse().ok()
    }
}
