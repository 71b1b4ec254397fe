//! A filter as the XDP program runs it (`filter.h`): a table of tests, each
//! with where to go next when it holds and when it does not, ending at
//! accept or refuse. Every jump goes forward, so a run takes at most one
//! step per entry, and the verifier can bound the loop.

use super::{Node, Test};

/// Entries the XDP program's table holds (`FILTER_OPS` in `bpf/filter.h`).
pub const MAX_OPS: usize = 128;

const BYTES: u8 = 0;
const FIELD: u8 = 1;
const L4PORT: u8 = 2;
const LEN: u8 = 3;
const ACCEPT: u8 = 4;
const REFUSE: u8 = 5;

/// `struct filter_op` of `bpf/filter.h`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Op {
    kind: u8,
    /// Bytes loaded (`BYTES`, `FIELD`); the port's offset in the
    /// transport header (`L4PORT`).
    size: u8,
    off: u16,
    jt: u16,
    jf: u16,
    lo: u32,
    hi: u32,
    val: [u8; 16],
    mask: [u8; 16],
}

// SAFETY: plain integers and byte arrays, no padding (48 bytes, as the C
// struct).
unsafe impl aya::Pod for Op {}

/// A compiled filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    ops: Vec<Op>,
}

fn op_of(t: &Test) -> Op {
    match *t {
        Test::Bytes {
            off,
            len,
            val,
            mask,
        } => Op {
            kind: BYTES,
            size: len,
            off,
            val,
            mask,
            ..Op::default()
        },
        Test::Field { off, size, lo, hi } => Op {
            kind: FIELD,
            size,
            off,
            lo,
            hi,
            ..Op::default()
        },
        Test::L4Port { l3, k, lo, hi } => Op {
            kind: L4PORT,
            size: k,
            off: l3,
            lo: lo as u32,
            hi: hi as u32,
            ..Op::default()
        },
        Test::Len { lo, hi } => Op {
            kind: LEN,
            lo,
            hi,
            ..Op::default()
        },
    }
}

/// Emits `n`'s tests, last first, going to `t` or `f` (indices into
/// `rev`); returns its first test's index.
fn emit(rev: &mut Vec<Op>, n: &Node, t: usize, f: usize) -> usize {
    match n {
        Node::Test(x) => {
            rev.push(Op {
                jt: t as u16,
                jf: f as u16,
                ..op_of(x)
            });
            rev.len() - 1
        }
        Node::And(a, b) => {
            let b = emit(rev, b, t, f);
            emit(rev, a, b, f)
        }
        Node::Or(a, b) => {
            let b = emit(rev, b, t, f);
            emit(rev, a, t, b)
        }
        Node::Not(a) => emit(rev, a, f, t),
    }
}

impl Program {
    /// Compiles `n`; `None` if it needs more than [`MAX_OPS`] entries.
    pub fn compile(n: &Node) -> Option<Program> {
        let mut rev = vec![
            Op {
                kind: ACCEPT,
                ..Op::default()
            },
            Op {
                kind: REFUSE,
                ..Op::default()
            },
        ];
        emit(&mut rev, n, 0, 1);
        if rev.len() > MAX_OPS {
            return None;
        }
        // The entry was emitted last: reversed, it comes first, and every
        // jump goes forward.
        let last = rev.len() - 1;
        let ops = rev
            .iter()
            .rev()
            .map(|o| match o.kind {
                ACCEPT | REFUSE => *o,
                _ => Op {
                    jt: (last - o.jt as usize) as u16,
                    jf: (last - o.jf as usize) as u16,
                    ..*o
                },
            })
            .collect();
        Some(Program { ops })
    }

    /// Its entries, for the XDP program's table.
    pub fn ops(&self) -> &[Op] {
        &self.ops
    }

    /// Runs it on `frame` (`wire_len` bytes on the wire) as the XDP
    /// program does: a load past the frame's end refuses it.
    pub fn run(&self, frame: &[u8], wire_len: u32) -> bool {
        let load = |off: usize, n: usize| frame.get(off..off + n);
        let mut pc = 0;
        for _ in 0..MAX_OPS {
            let Some(op) = self.ops.get(pc) else {
                return false;
            };
            let held = match op.kind {
                ACCEPT => return true,
                REFUSE => return false,
                BYTES => {
                    let Some(b) = load(op.off as usize, op.size as usize) else {
                        return false;
                    };
                    let mut buf = [0u8; 16];
                    buf[..b.len()].copy_from_slice(b);
                    buf.iter()
                        .zip(&op.mask)
                        .zip(&op.val)
                        .all(|((b, m), v)| b & m == *v)
                }
                FIELD => {
                    let Some(b) = load(op.off as usize, op.size as usize) else {
                        return false;
                    };
                    let v = b.iter().fold(0u32, |a, &x| (a << 8) | x as u32);
                    (op.lo..=op.hi).contains(&v)
                }
                L4PORT => {
                    let Some(&vhl) = frame.get(op.off as usize) else {
                        return false;
                    };
                    let at = op.off as usize + (vhl & 0x0f) as usize * 4 + op.size as usize;
                    let Some(b) = load(at, 2) else {
                        return false;
                    };
                    (op.lo..=op.hi).contains(&(u16::from_be_bytes([b[0], b[1]]) as u32))
                }
                LEN => (op.lo..=op.hi).contains(&wire_len),
                _ => return false,
            };
            pc = if held { op.jt } else { op.jf } as usize;
        }
        false
    }
}
