//! The stage queue: order and bounds, the kicks both ways, and a second
//! process attached by descriptor.

use super::*;

#[test]
fn frames_go_through_in_order_and_the_queue_bounds_them() {
    let q = StageQueue::create("t", 4, 2).unwrap();
    for i in 0..4u8 {
        assert!(q.push(&[i; 100], 60, i as u32, 7));
    }
    assert!(!q.push(&[9; 10], 60, 0, 0));
    assert_eq!(q.len(), 4);
    let s = q.peek_at(1).unwrap();
    assert_eq!((s.data.len(), s.orig_len, s.port, s.ts_ns), (60, 100, 1, 7));
    assert!(s.data.iter().all(|b| *b == 1));
    assert_eq!(
        q.queued_bytes(),
        400,
        "lengths on the wire, not what was kept"
    );
    q.pop(2);
    assert_eq!(q.queued_bytes(), 200);
    assert_eq!(q.peek().unwrap().port, 2);
    assert!(q.push(&[4; 10], 60, 4, 0) && q.push(&[5; 10], 60, 5, 0));
    assert_eq!(q.queued_bytes(), 220);
    let ports: Vec<u32> = (0..4).map(|k| q.peek_at(k).unwrap().port).collect();
    assert_eq!(ports, vec![2, 3, 4, 5]);
    assert!(q.peek_at(4).is_none());
    q.count(1, 3);
    assert_eq!(q.counter(1), 3);
}

#[test]
fn the_producer_is_kicked_once_drained_to_its_level() {
    let q = StageQueue::create("t", 8, 0).unwrap();
    for _ in 0..8 {
        assert!(q.push(&[1; 64], 64, 0, 0));
    }
    q.kick_when_drained_to(2);
    assert!(!q.producer_kicked());
    q.pop(5);
    assert!(!q.producer_kicked(), "3 queued is above 2");
    q.pop(1);
    assert!(q.producer_kicked());
    assert!(q.take_producer_kick());
    q.pop(2);
    assert!(!q.producer_kicked(), "one kick per request");
    // Already drained when asked: kicked at once.
    q.kick_when_drained_to(0);
    assert!(q.take_producer_kick());
}

#[test]
fn a_process_attaches_by_descriptor_and_sees_the_same_frames() {
    let q = StageQueue::create("t", 4, 3).unwrap();
    assert!(q.push(b"hello", 64, 1, 0));
    let fds = q.fds();
    // Duplicates stand in for the descriptors a child inherits.
    let dup = |fd: RawFd| unsafe { libc::dup(fd) };
    let other = StageFds {
        region: dup(fds.region),
        to_consumer: dup(fds.to_consumer),
        to_producer: dup(fds.to_producer),
    };
    assert_eq!(StageFds::parse(&other.to_arg()).unwrap().all(), other.all());
    // SAFETY: fresh duplicates, owned by nobody else.
    let c = unsafe { StageQueue::attach(other) }.unwrap();
    assert_eq!(c.peek().unwrap().data, b"hello");
    c.count(2, 5);
    c.pop(1);
    assert_eq!(q.len(), 0);
    assert_eq!(q.counter(2), 5);
    let t = std::thread::spawn(move || {
        c.wait_for_work(5_000).unwrap();
        c.peek().map(|s| s.data.to_vec())
    });
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(q.push(b"wake", 64, 0, 0));
    assert_eq!(t.join().unwrap().as_deref(), Some(&b"wake"[..]));
}
