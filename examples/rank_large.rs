//! Rank filters with windows larger than a selection network takes (over 441 values): a
//! 31x31 median and a 25x25 percentile on a u16 image, through the typed facade.
//! Run with `cargo run --example rank_large`.

use kiln::embed::rank::{median_filter, percentile_filter};
use kiln::embed::{Mode, RankOptions};
use ndarray::{ArrayD, IxDyn};

fn main() -> Result<(), kiln::Error> {
    let image = ArrayD::from_shape_fn(IxDyn(&[256, 320]), |i| {
        ((i[0] * 37 + i[1] * 11) % 1000 + (i[0] ^ i[1]) % 97) as u16
    });
    let t = std::time::Instant::now();
    let median = median_filter(image.view(), 31, &RankOptions::default())?;
    println!("median 31x31 of {:?}: {:?}", image.shape(), t.elapsed());
    let options = RankOptions {
        mode: Mode::Constant,
        cval: 0.0,
        origin: vec![0, 0],
    };
    let p90 = percentile_filter(image.view(), 90.0, [25, 25], &options)?;
    println!(
        "row 0, first 6: median {} / 90th percentile {}",
        median.slice(ndarray::s![0, ..6]),
        p90.slice(ndarray::s![0, ..6])
    );
    Ok(())
}
