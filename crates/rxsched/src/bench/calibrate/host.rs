//! What the running kernel says of itself that a profile needs.

use super::BenchError;

/// The running kernel's `CONFIG_HZ`, from `/proc/config.gz` or
/// `/boot/config-RELEASE`; refused, naming both, when neither says.
pub fn kernel_hz() -> Result<u64, BenchError> {
    use std::io::Read;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let boot = format!("/boot/config-{}", release.trim());
    let mut texts = Vec::new();
    if let Ok(f) = std::fs::File::open("/proc/config.gz") {
        let mut s = String::new();
        if flate2::read::GzDecoder::new(f)
            .read_to_string(&mut s)
            .is_ok()
        {
            texts.push(s);
        }
    }
    texts.extend(std::fs::read_to_string(&boot).ok());
    texts
        .iter()
        .flat_map(|t| t.lines())
        .find_map(|l| l.strip_prefix("CONFIG_HZ=")?.trim().parse().ok())
        .ok_or_else(|| {
            BenchError(format!(
                "calibrate --real: neither /proc/config.gz nor {boot} gives CONFIG_HZ \
                 (the scheduler's tick); give it as tick_hz in the profile by hand"
            ))
        })
}
