//! The report as a reader sees it: headless Chromium opens `index.html` at
//! a desktop and a narrow width; every figure and view loads and decodes,
//! and the page does not scroll sideways.

use std::path::Path;
use std::process::Command;

/// `index.html` with a script that, once everything has loaded, writes
/// what it found into the body's `data-probe` attribute.
const PROBE: &str = "<script>\nwindow.addEventListener('load', () => {\n  const imgs = [...document.images];\n  const bad = imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src'));\n  const d = document.documentElement;\n  document.body.setAttribute('data-probe', 'images ' + imgs.length + ' broken [' + bad.join(' ') + '] scroll ' + d.scrollWidth + ' view ' + window.innerWidth);\n});\n</script>";

/// What Chromium saw at `width`: images found, the broken ones, the
/// page's width and the window's.
fn look(dir: &Path, width: u32) -> (usize, String, u32, u32) {
    let page = dir.join("probe.html");
    let o = Command::new("timeout")
        .args([
            "120",
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
        ])
        .arg(format!("--window-size={width},900"))
        .args(["--virtual-time-budget=20000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("chromium");
    let dom = String::from_utf8_lossy(&o.stdout);
    let at = dom.find("data-probe=\"").unwrap_or_else(|| {
        panic!(
            "no probe in what chromium printed: {}",
            String::from_utf8_lossy(&o.stderr)
        )
    });
    let probe = &dom[at + 12..];
    let probe = &probe[..probe.find('"').expect("closed")];
    let word = |w: &str| -> String {
        let i = probe.find(w).unwrap_or_else(|| panic!("{probe}")) + w.len() + 1;
        probe[i..].split(' ').next().unwrap().to_string()
    };
    let broken = probe[probe.find('[').unwrap() + 1..probe.find(']').unwrap()].to_string();
    (
        word("images").parse().unwrap(),
        broken,
        word("scroll").parse().unwrap(),
        word("view").parse().unwrap(),
    )
}

#[test]
fn every_figure_loads_in_chromium_and_nothing_scrolls_sideways() {
    if !rxsched_linux::needs::tool("chromium", "chromium") {
        return;
    }
    let dir = std::env::temp_dir().join(format!("rxsched-browser-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let o = Command::new(env!("CARGO_BIN_EXE_rxsched"))
        .args([
            "reproduce",
            "--quick",
            "mogul-fig6-3",
            "srp-fig6",
            "hansen-switch",
            "--out",
        ])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let index = std::fs::read_to_string(dir.join("index.html")).unwrap();
    let want = index.matches("<img ").count();
    assert!(want >= 5, "{want} images in the report");
    std::fs::write(
        dir.join("probe.html"),
        index.replace("</body>", &format!("{PROBE}</body>")),
    )
    .unwrap();
    for width in [1280, 400] {
        let (images, broken, scroll, view) = look(&dir, width);
        assert_eq!(images, want, "at {width} px");
        assert!(
            broken.is_empty(),
            "at {width} px these did not load: {broken}"
        );
        assert!(
            scroll <= view,
            "at {width} px the page is {scroll} px wide in a {view} px window"
        );
        eprintln!("chromium at {width} px: {images} images loaded, page {scroll} px in {view}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
