fn main() {
    let path = std::env::args().nth(1).unwrap();
    let sets: Vec<_> = std::env::args().skip(2).map(|s| rxsched_sim::scenario::parse_set(&s).unwrap()).collect();
    let l = rxsched_sim::Loaded::read(std::path::Path::new(&path)).unwrap_or_else(|e| { eprintln!("{e}"); std::process::exit(2) });
    let s = l.with(&sets).unwrap_or_else(|e| { eprintln!("{e}"); std::process::exit(2) });
    let (m, _) = rxsched_sim::run(&s, None).unwrap();
    println!("{}", serde_json::to_string(&m).unwrap());
}
