//! Simulator speed: events per second on one core, for the figure 6-3
//! polling scenario (quota 10, past saturation) and, as a peer in the same
//! run, the unmodified kernel at the same rate.
//!
//! `cargo bench -p rxsched-sim --bench events`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rxsched_sim::scenario::{parse_set, Loaded};

const FIG: &str = include_str!("../../../experiments/mogul-fig6-3.toml");

fn scenario(sets: &[&str]) -> rxsched_sim::Scenario {
    let l = Loaded::parse("mogul-fig6-3.toml", FIG.to_string(), None).unwrap();
    let sets: Vec<_> = sets.iter().map(|s| parse_set(s).unwrap()).collect();
    l.with(&sets).unwrap()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("simulator");
    for (name, kind) in [("polling-quota-10", "polling"), ("unmodified", "bsd")] {
        let s = scenario(&[
            &format!("kernel.kind={kind}"),
            "kernel.quota=10",
            "traffic.rate_pps=12000",
        ]);
        let (m, _) = rxsched_sim::run(&s, None).unwrap();
        eprintln!(
            "{name}: {} events per run; single run {:.2} ms wall = {:.1} M events/s",
            m.events,
            m.wall_ms,
            m.events as f64 / m.wall_ms / 1e3
        );
        g.throughput(Throughput::Elements(m.events));
        g.bench_function(name, |b| b.iter(|| rxsched_sim::run(&s, None).unwrap()));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
