//! Replays every reproducer in tests/corpus/ (fixed bugs stay fixed), and checks the
//! reproducer format and replay on generated and planted-fault cases.

use std::path::Path;

use kiln::codegen::Fault;
use kiln::fuzz::{fuzz, generate, replay, FindingKind, FuzzOptions, Reproducer};

#[test]
fn corpus_replays_clean() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let report = replay(&dir, None).expect("corpus readable");
    eprintln!("{}", report.summary());
    assert!(report.passed(), "{}", report.summary());
}

#[test]
fn reproducer_text_round_trips() {
    for seed in 0..200 {
        let case = generate(seed, 12);
        let r = Reproducer {
            kind: FindingKind::Mismatch,
            seed,
            fault: Fault::ALL.get(seed as usize % 5).copied(),
            detail: "a detail".into(),
            case,
        };
        let text = r.to_text();
        let back =
            Reproducer::from_text(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}\n{text}"));
        assert_eq!(back, r, "seed {seed}");
    }
}

#[test]
fn malformed_reproducers_are_errors() {
    let r = Reproducer {
        kind: FindingKind::Crash,
        seed: 3,
        fault: None,
        detail: String::new(),
        case: generate(3, 4),
    };
    let text = r.to_text();
    for bad in [
        text.replace("kind: crash", "kind: oops"),
        text.replace("end graph", ""),
        text.replace("\nend\n", "\n"),
        text.replacen("data:", "dat:", 1),
        text.replacen(" order [", " order [9,", 1),
    ] {
        assert!(Reproducer::from_text(&bad).is_err(), "accepted:\n{bad}");
    }
    // Too few values for the shape.
    let mut short = r.clone();
    short.case.inputs[0].data.pop();
    assert!(Reproducer::from_text(&short.to_text()).is_err());
}

#[test]
fn planted_fault_reproducer_replays() {
    let dir = std::env::temp_dir().join(format!("kiln-fuzz-replay-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let opts = FuzzOptions {
        cases: 2000,
        seed: 11,
        fault: Some(Fault::DropNanMask),
        max_findings: Some(1),
        corpus: Some(dir.clone()),
        ..FuzzOptions::default()
    };
    let report = fuzz(&opts);
    assert_eq!(report.reproducers.len(), 1, "{}", report.summary());
    let path = &report.reproducers[0];
    let with_fault = replay(path, Some(Fault::DropNanMask)).unwrap();
    assert!(!with_fault.passed(), "{}", with_fault.summary());
    let without = replay(&dir, None).unwrap();
    assert_eq!(without.results.len(), 1);
    assert!(without.passed(), "{}", without.summary());
    assert!(replay(&dir.join("missing.repro"), None).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
