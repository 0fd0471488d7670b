//! Prints the merge networks `share_columns` uses for box medians: comparators, live min/max
//! operations and derivation time, against the pruned Batcher selector of the same window.
//!
//! `cargo run --release --example network_cost`

use std::time::Instant;

use kiln::ir::network::{batcher_sort, live_ops, selection_network, sorted_columns_selection};

fn main() {
    println!("window  batcher ops  column sort ops  merge ops  merge comparators  derive ms");
    for (ky, kx) in [(3, 3), (3, 5), (5, 3), (5, 5), (3, 7), (7, 3)] {
        let n = ky * kx;
        let rank = (n - 1) / 2;
        let batcher = selection_network(n, rank).map_or(0, |net| live_ops(&net));
        let column = batcher_sort(ky).len() * 2;
        let t = Instant::now();
        let merge = sorted_columns_selection(ky, kx, rank);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        match merge {
            Some(net) => println!(
                "{ky}x{kx}     {batcher:>11}  {column:>15}  {:>9}  {:>17}  {ms:>9.3}",
                live_ops(&net),
                net.pairs.len()
            ),
            None => println!("{ky}x{kx}     {batcher:>11}  {column:>15}  (not derived)  {ms:>9.3}"),
        }
    }
}
