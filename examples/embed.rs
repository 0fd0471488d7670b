//! Embed kiln with the typed facade: a fused opening + median on a 3-D ndarray volume.
//! Run with `cargo run --example embed`.

use kiln::{Mode, Op, Pipeline};
use ndarray::{ArrayD, IxDyn};

fn main() -> Result<(), kiln::Error> {
    let volume = ArrayD::from_shape_fn(IxDyn(&[8, 48, 64]), |i| (i[1] * 3 + i[2] % 23) as f32);
    // Every axis is spatial, as in scipy; compiled once, run on any shape.
    let chain = Pipeline::new()
        .then(Op::grey_opening(3).mode(Mode::Nearest))
        .then(Op::median_filter([1, 5, 5]));
    let smoothed = chain.run(volume.view())?;
    // Only the last two axes (a stack of images), written into the caller's array.
    let mut planes = ArrayD::<f32>::zeros(volume.raw_dim());
    let erode = Pipeline::from(Op::grey_erosion(5)).axes(&[-2, -1]);
    erode.run_into(volume.view(), planes.view_mut())?;
    println!("{:?} -> {:?}", volume.shape(), smoothed.shape());
    println!(
        "eroded plane 0, row 0: {}",
        planes.slice(ndarray::s![0, 0, ..8])
    );
    Ok(())
}
