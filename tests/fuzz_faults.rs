//! Proof that the fuzzer works: every planted miscompilation is found within 2000 cases of a
//! fixed seed and shrunk to at most 5 nodes; and a bounded clean run finds nothing.

use kiln::codegen::Fault;
use kiln::fuzz::{fuzz, FuzzOptions, Harness, Reproducer, Verdict};

const SEED: u64 = 0x5eed;

fn finds_and_shrinks(fault: Fault) {
    let opts = FuzzOptions {
        cases: 2000,
        seed: SEED,
        fault: Some(fault),
        max_findings: Some(1),
        ..FuzzOptions::default()
    };
    let report = fuzz(&opts);
    let finding = report
        .mismatches
        .iter()
        .chain(&report.crashes)
        .next()
        .unwrap_or_else(|| panic!("{fault:?} not found in {} cases", report.cases));
    let text = kiln::ir::printer::print(&finding.case.graph);
    eprintln!(
        "{fault:?}: found at case {} ({} nodes), shrunk to {} nodes: {}\n{text}",
        finding.case_index,
        finding.original_nodes,
        finding.case.node_count(),
        finding.detail
    );
    assert!(finding.case_index < 2000);
    assert!(
        finding.case.node_count() <= 5,
        "{fault:?} shrunk only to {} nodes:\n{text}",
        finding.case.node_count()
    );
    // The shrunk case is the fault's doing: it reproduces with the fault, passes without.
    assert!(
        matches!(Harness::new(Some(fault)).check(&finding.case), Verdict::Finding(k, _) if k == finding.kind)
    );
    assert_eq!(Harness::new(None).check(&finding.case), Verdict::Pass);
    // And it survives the reproducer file format.
    let repro = finding.reproducer_of(Some(fault));
    let back = Reproducer::from_text(&repro.to_text()).expect("reproducer parses");
    assert_eq!(back, repro);
}

#[test]
fn finds_swap_comparator() {
    finds_and_shrinks(Fault::SwapComparator);
}

#[test]
fn finds_wrong_border_right_edge() {
    finds_and_shrinks(Fault::WrongBorderRightEdge);
}

#[test]
fn finds_drop_nan_mask() {
    finds_and_shrinks(Fault::DropNanMask);
}

#[test]
fn finds_fmin_semantics() {
    finds_and_shrinks(Fault::FminSemantics);
}

#[test]
fn every_fault_has_a_test() {
    // Adding a fault without a test above fails here.
    assert_eq!(Fault::ALL.len(), 4);
}

#[test]
fn bounded_clean_run_finds_nothing() {
    let opts = FuzzOptions {
        cases: 300,
        seed: 1,
        ..FuzzOptions::default()
    };
    let report = fuzz(&opts);
    eprintln!("{}", report.summary());
    assert_eq!(report.cases, 300);
    assert!(report.kernels.compiled > 0);
    // The random graphs reach the backend's column sharing and edge vectors too (they are
    // checked, not skipped).
    assert!(report.kernels.sharing_columns > 0, "{}", report.summary());
    assert!(report.kernels.carrying_values > 0, "{}", report.summary());
    assert!(report.kernels.edge_vectors > 0, "{}", report.summary());
    // Both outcomes of the clean-input specialisation's per-block check are exercised.
    assert!(report.kernels.clean_blocks > 0, "{}", report.summary());
    assert!(report.kernels.nonneg_blocks > 0, "{}", report.summary());
    assert!(
        report.kernels.clean_blocks_aborted > 0,
        "{}",
        report.summary()
    );
    assert!(report.is_clean(), "{}", report.summary());
}
