//! tcpdump's filter language (pcap-filter) for `rxsched capture`: the
//! subset people type every day, with libpcap's meaning on Ethernet
//! frames, compiled into a program the monitor's XDP program runs, so that
//! a frame the filter refuses never reaches user space.
//!
//! ```text
//! udp and dst port 53 and net 198.18.0.0/15
//! host 198.18.0.1 and not (port 22 or icmp)
//! vlan 100 and tcp portrange 8000-8100
//! ```
//!
//! Primitives: `host`, `net` (`/LEN`, `mask M`, or a partial address
//! such as `198.18`, a /16, as libpcap reads it), `port`, `portrange LO-HI`, each with an optional direction
//! (`src`, `dst`, `src or dst`, `src and dst`) and protocol (`ether`, `ip`,
//! `ip6`, `arp`, `rarp`, `tcp`, `udp`, `sctp`); the protocols on their own
//! and `icmp`, `icmp6`; `ip proto N`, `ip6 proto N`, `proto N` (`\tcp` for
//! a name); `vlan [ID]`; `len REL N`, `less N`, `greater N`; `and`/`&&`,
//! `or`/`||`, `not`/`!` and parentheses. Port and host names are not
//! looked up.
//!
//! libpcap's rules are kept where they surprise, since a tcpdump user's
//! expression must keep its meaning: `and` and `or` bind equally, left to
//! right (`a or b and c` is `(a or b) and c`); a bare value after `and`,
//! `or` or `not` takes the qualifiers of the primitive before it (`port 53
//! or 54`); `host` and `net` on IPv4 match ARP and RARP's addresses too;
//! ports are looked for in first fragments only (IPv4) or right after the
//! fixed header (IPv6); each `vlan` moves every primitive after it 4 bytes
//! further into the frame, inside parentheses or not; and a test that would
//! read past the frame's end refuses the frame outright, as a classic BPF
//! load out of bounds does.
//!
//! [`Filter::place`] splits an expression between the XDP program and the
//! polling thread: the XDP program has room for [`MAX_OPS`] tests, and the
//! top-level conjuncts that do not fit run in the polling thread instead.

mod lex;
mod lower;
mod parse;
mod prog;

pub use prog::{Op, Program, MAX_OPS};

use std::fmt;

/// A syntax or meaning error, at a column of the expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// The expression.
    pub text: String,
    /// The column (1-based, in characters) the error is at.
    pub column: usize,
    /// What is wrong.
    pub what: String,
}

impl FilterError {
    pub(crate) fn at(text: &str, byte: usize, what: String) -> FilterError {
        let byte = byte.min(text.len());
        FilterError {
            text: text.to_string(),
            column: text[..byte].chars().count() + 1,
            what,
        }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "filter expression, column {}: {}\n  {}\n  {}^",
            self.column,
            self.what,
            self.text,
            " ".repeat(self.column - 1)
        )
    }
}

impl std::error::Error for FilterError {}

/// One load and comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Test {
    /// The `len` bytes at `off`, under `mask`, equal `val`.
    Bytes {
        /// Offset in the frame.
        off: u16,
        /// 1, 2, 4, 6 or 16.
        len: u8,
        /// The value (already under the mask).
        val: [u8; 16],
        /// The mask.
        mask: [u8; 16],
    },
    /// The big-endian number of `size` bytes at `off` is in `lo..=hi`.
    Field {
        /// Offset in the frame.
        off: u16,
        /// 1, 2 or 4.
        size: u8,
        /// Lowest value.
        lo: u32,
        /// Highest value.
        hi: u32,
    },
    /// The port `k` bytes into the transport header behind the IPv4
    /// header at `l3` (whose length its first byte gives) is in `lo..=hi`.
    L4Port {
        /// The IPv4 header's offset.
        l3: u16,
        /// 0: source port, 2: destination port.
        k: u8,
        /// Lowest port.
        lo: u16,
        /// Highest port.
        hi: u16,
    },
    /// The frame's length on the wire is in `lo..=hi`.
    Len {
        /// Shortest.
        lo: u32,
        /// Longest.
        hi: u32,
    },
}

impl Test {
    /// The test's outcome on `frame` (`wire_len` bytes long on the wire),
    /// or `None` if it reads past the frame's end.
    pub fn eval(&self, frame: &[u8], wire_len: u32) -> Option<bool> {
        let at = |off: usize, n: usize| frame.get(off..off + n);
        let num = |b: &[u8]| b.iter().fold(0u32, |a, &x| (a << 8) | x as u32);
        Some(match *self {
            Test::Bytes {
                off,
                len,
                ref val,
                ref mask,
            } => at(off as usize, len as usize)?
                .iter()
                .zip(mask)
                .zip(val)
                .all(|((b, m), v)| b & m == *v),
            Test::Field { off, size, lo, hi } => {
                (lo..=hi).contains(&num(at(off as usize, size as usize)?))
            }
            Test::L4Port { l3, k, lo, hi } => {
                let ihl = (*frame.get(l3 as usize)? & 0x0f) as usize * 4;
                let p = num(at(l3 as usize + ihl + k as usize, 2)?) as u16;
                (lo..=hi).contains(&p)
            }
            Test::Len { lo, hi } => (lo..=hi).contains(&wire_len),
        })
    }
}

/// A filter's tests combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// One test.
    Test(Test),
    /// Both.
    And(Box<Node>, Box<Node>),
    /// Either.
    Or(Box<Node>, Box<Node>),
    /// Not.
    Not(Box<Node>),
}

impl Node {
    /// Evaluates left to right, stopping as soon as the outcome is known;
    /// `None` if a test read past the frame's end.
    pub fn eval(&self, frame: &[u8], wire_len: u32) -> Option<bool> {
        match self {
            Node::Test(t) => t.eval(frame, wire_len),
            Node::And(a, b) => Some(a.eval(frame, wire_len)? && b.eval(frame, wire_len)?),
            Node::Or(a, b) => Some(a.eval(frame, wire_len)? || b.eval(frame, wire_len)?),
            Node::Not(a) => Some(!a.eval(frame, wire_len)?),
        }
    }

    /// Whether it accepts `frame`.
    pub fn accepts(&self, frame: &[u8], wire_len: u32) -> bool {
        self.eval(frame, wire_len) == Some(true)
    }
}

/// A parsed filter expression.
#[derive(Debug, Clone)]
pub struct Filter {
    text: String,
    expr: parse::Expr,
    /// Its tests, built once.
    node: Node,
}

/// Where each part of a filter runs.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The program for the XDP program, and the part of the expression it
    /// holds; `None` when nothing fits.
    pub xdp: Option<(Program, String)>,
    /// The rest, for the polling thread; `None` when the XDP program holds
    /// all of it.
    pub polling: Option<(Node, String)>,
}

impl Filter {
    /// Parses `text`.
    pub fn parse(text: &str) -> Result<Filter, FilterError> {
        let expr = parse::parse(text)?;
        Ok(Filter {
            text: text.to_string(),
            node: expr.node(),
            expr,
        })
    }

    /// The expression as given.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Its tests.
    pub fn node(&self) -> Node {
        self.node.clone()
    }

    /// Whether it accepts `frame`, `wire_len` bytes long on the wire.
    pub fn accepts(&self, frame: &[u8], wire_len: u32) -> bool {
        self.node.accepts(frame, wire_len)
    }

    /// Splits it between the XDP program (`in_xdp`: XDP can run it) and
    /// the polling thread: the top-level conjuncts whose program fits in
    /// [`MAX_OPS`] together go to XDP, the others stay behind.
    pub fn place(&self, in_xdp: bool) -> Placement {
        let (mut xdp, mut rest): (Vec<&parse::Expr>, Vec<&parse::Expr>) = (vec![], vec![]);
        let mut placed: Option<(Node, Program)> = None;
        for c in self.expr.conjuncts() {
            let n = c.node();
            let tried = match &placed {
                Some((p, _)) => Node::And(Box::new(p.clone()), Box::new(n)),
                None => n,
            };
            if let Some(prog) = in_xdp.then(|| Program::compile(&tried)).flatten() {
                placed = Some((tried, prog));
                xdp.push(c);
            } else {
                rest.push(c);
            }
        }
        let join = |v: &[&parse::Expr]| {
            if v.len() == 1 {
                self.text[v[0].at..v[0].end].to_string()
            } else {
                v.iter()
                    .map(|e| e.text(&self.text))
                    .collect::<Vec<_>>()
                    .join(" and ")
            }
        };
        let polling = rest
            .iter()
            .map(|e| e.node())
            .reduce(|a, b| Node::And(Box::new(a), Box::new(b)))
            .map(|n| (n, join(&rest)));
        Placement {
            xdp: placed.map(|(_, prog)| (prog, join(&xdp))),
            polling,
        }
    }
}

#[cfg(test)]
mod corpus;
#[cfg(test)]
mod tests;
