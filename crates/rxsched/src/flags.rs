//! What flags become when they are more than a number: `--vary`'s values
//! and the worker pool `--jobs` sizes. (`--set` is the scenario loader's own,
//! `rxsched_sim::scenario::parse_set`.)

use crate::error::{Error, Result};

/// At most this many points in one sweep.
const MAX_POINTS: usize = 10_000;

/// Parses `KEY=V1,V2` or `KEY=FROM:TO:STEP`.
pub fn parse_vary(vary: &str) -> Result<(String, Vec<f64>)> {
    let bad = |m: &str| Error::Input(format!("--vary {:?}: {m}", short(vary)));
    let (k, v) = vary
        .split_once('=')
        .ok_or_else(|| bad("expected KEY=LIST or KEY=FROM:TO:STEP"))?;
    let num = |s: &str| {
        s.trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .ok_or_else(|| bad(&format!("{s:?} is not a finite number")))
    };
    let values = if v.contains(':') {
        let p: Vec<&str> = v.split(':').collect();
        if p.len() != 3 {
            return Err(bad("a range is FROM:TO:STEP"));
        }
        let (from, to, step) = (num(p[0])?, num(p[1])?, num(p[2])?);
        if step <= 0.0 || to < from {
            return Err(bad("need FROM <= TO and STEP > 0"));
        }
        let n = ((to - from) / step + 1e-9).floor();
        if n >= MAX_POINTS as f64 {
            return Err(bad("more than 10,000 points"));
        }
        (0..=n as usize).map(|i| from + step * i as f64).collect()
    } else {
        v.split(',').map(num).collect::<Result<Vec<_>>>()?
    };
    if values.is_empty() {
        return Err(bad("no values"));
    }
    if values.len() > MAX_POINTS {
        return Err(bad("more than 10,000 points"));
    }
    Ok((k.trim().to_string(), values))
}

/// The worker pool `--jobs` asks for (default: one thread per core).
pub fn pool(jobs: Option<usize>) -> Result<rayon::ThreadPool> {
    let mut b = rayon::ThreadPoolBuilder::new();
    if let Some(n) = jobs {
        if n == 0 {
            return Err(Error::flag("jobs", "must be at least 1"));
        }
        b = b.num_threads(n);
    }
    b.build().map_err(|e| Error::Run(e.to_string()))
}

/// A flag's value cut to a readable length for an error message.
pub fn short(v: &str) -> String {
    match v.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &v[..i]),
        None => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vary_forms_and_limits() {
        assert_eq!(parse_vary("a=1,2,3").unwrap().1, vec![1.0, 2.0, 3.0]);
        assert_eq!(parse_vary("a=0:10:5").unwrap().1, vec![0.0, 5.0, 10.0]);
        assert!(parse_vary("a=1:nan:1").is_err());
        assert!(parse_vary("a=0:1e9:1").is_err());
        let many = format!("a={}", vec!["1"; 20_000].join(","));
        assert!(parse_vary(&many).is_err());
        assert!(parse_vary("a").is_err());
    }
}
