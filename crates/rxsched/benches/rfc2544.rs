//! The RFC 2544 throughput search behind `spanos-table1`: all six driver
//! variants at all eight frame sizes, in `--quick` form, on one core; and,
//! as a peer in the same run, one search (ORIGINAL, 64-byte frames).
//!
//! `cargo bench -p rxsched --bench rfc2544`

use criterion::{criterion_group, criterion_main, Criterion};
use rxsched::experiments::ExperimentFile;
use rxsched::{experiments, figure};

fn bench(c: &mut Criterion) {
    let src = experiments::get("spanos-table1").expect("spanos-table1 exists");
    let l = ExperimentFile::parse("spanos-table1", src.to_string(), None).unwrap();
    let opts = figure::Options {
        quick: true,
        ..Default::default()
    };
    let plan = figure::plan(&l, None, &opts).unwrap();
    let mut g = c.benchmark_group("rfc2544");
    g.sample_size(10);
    g.bench_function("table1-quick-48-searches", |b| {
        b.iter(|| {
            plan.jobs
                .iter()
                .map(|j| figure::run_job(j, &plan).unwrap().0.events)
                .sum::<u64>()
        })
    });
    g.bench_function("one-search-original-64B", |b| {
        b.iter(|| figure::run_job(&plan.jobs[0], &plan).unwrap().0.events)
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
