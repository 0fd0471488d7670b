//! JIT code never reads or writes outside its tensors. Inputs and outputs are placed
//! against inaccessible pages: once ending exactly where a guard page begins (a load or
//! store past the last element faults), once starting right after one (a load before the
//! first element faults). Every operator family runs on them at every row width the
//! vector paths treat differently (single vectors, shared steps and their leftover
//! columns, edge vectors, the 16-lane byte path's wide rows), at several heights, through
//! the first compile and the tiered kernels (bigger steps, edge vectors of big stages,
//! clean-input forms), on clean data and on data with NaN. An out-of-bounds access ends
//! the test binary with SIGSEGV; every output is also compared with eager's, bit for bit.
//! Cropped views (rows longer than the view's, the view at either end of its buffer) get
//! the same treatment. Limits: Linux on x86_64 and aarch64 (the latter under qemu in
//! scripts/ci-aarch64.sh); the guard size is the page size `sysconf` reports.

#![cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
))]

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Mutex;
use std::time::Duration;

use common::{f32_tensor, op_graph, Data};
use kiln::ir::DType;
use kiln::runtime::tensor::{first_difference, Storage};
use kiln::{eager, Engine, Tensor};

extern "C" {
    fn mmap(addr: *mut c_void, len: usize, prot: i32, flags: i32, fd: i32, off: i64)
        -> *mut c_void;
    fn mprotect(addr: *mut c_void, len: usize, prot: i32) -> i32;
    fn munmap(addr: *mut c_void, len: usize) -> i32;
    fn sysconf(name: i32) -> i64;
}

const PROT_NONE: i32 = 0;
const PROT_READ_WRITE: i32 = 1 | 2;
const MAP_PRIVATE_ANONYMOUS: i32 = 0x02 | 0x20;
/// `_SC_PAGESIZE` in glibc on Linux (the same number on x86_64 and aarch64).
const SC_PAGESIZE: i32 = 30;

/// The page size: 4 KiB on x86_64, 4, 16 or 64 KiB on aarch64 kernels, so asked for
/// (`sysconf` does not allocate, so the allocator may call it).
fn page() -> usize {
    // SAFETY: `sysconf` only reads a configuration value.
    let p = unsafe { sysconf(SC_PAGESIZE) };
    usize::try_from(p)
        .ok()
        .filter(|p| p.is_power_of_two())
        .unwrap_or(4096)
}

/// Where a guarded allocation sits against its guard pages.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Side {
    /// Its last byte is the last before a guard page.
    End,
    /// Its first byte is the first after a guard page.
    Start,
}

thread_local! {
    /// Set while this thread makes an allocation that must be guarded.
    static GUARD: Cell<Option<Side>> = const { Cell::new(None) };
}

/// Live guarded allocations: (pointer, mapping, mapping length); zero where free. A fixed
/// array, so that the allocator never allocates.
static LIVE: Mutex<[(usize, usize, usize); 16]> = Mutex::new([(0, 0, 0); 16]);

/// The system allocator, except for allocations made under [`GUARD`]: those get a mapping
/// of their own with an inaccessible page on each side.
struct Guarded;

// SAFETY: every pointer handed out is either the system allocator's (and returned to it)
// or inside a fresh private mapping of at least `layout.size()` accessible bytes, aligned
// to `layout.align()` (checked, else the system allocator serves it), and unmapped only
// when deallocated.
unsafe impl GlobalAlloc for Guarded {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let side = GUARD.try_with(|g| g.get()).ok().flatten();
        match side {
            Some(side) if layout.size() > 0 => {
                guarded_alloc(layout, side).unwrap_or_else(|| System.alloc(layout))
            }
            _ => System.alloc(layout),
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = live.iter_mut().find(|e| e.0 == ptr as usize) {
            let (_, base, len) = std::mem::take(e);
            drop(live);
            munmap(base as *mut c_void, len);
            return;
        }
        drop(live);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static ALLOCATOR: Guarded = Guarded;

/// Maps the pages for `layout` between two inaccessible ones and places the allocation
/// against one of them; `None` (the caller falls back to the system allocator) if that
/// fails or the placement would be misaligned.
///
/// # Safety
/// Called from the global allocator only.
unsafe fn guarded_alloc(layout: Layout, side: Side) -> Option<*mut u8> {
    let page = page();
    let data = layout.size().div_ceil(page) * page;
    let len = data + 2 * page;
    let base = mmap(
        std::ptr::null_mut(),
        len,
        PROT_READ_WRITE,
        MAP_PRIVATE_ANONYMOUS,
        -1,
        0,
    );
    if base as isize == -1 {
        return None;
    }
    let base = base as usize;
    if mprotect(base as *mut c_void, page, PROT_NONE) != 0
        || mprotect((base + page + data) as *mut c_void, page, PROT_NONE) != 0
    {
        munmap(base as *mut c_void, len);
        return None;
    }
    let ptr = match side {
        Side::Start => base + page,
        Side::End => base + page + data - layout.size(),
    };
    let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let slot = live.iter_mut().find(|e| e.0 == 0);
    match slot {
        Some(e) if ptr % layout.align() == 0 => {
            *e = (ptr, base, len);
            Some(ptr as *mut u8)
        }
        _ => {
            drop(live);
            munmap(base as *mut c_void, len);
            None
        }
    }
}

/// `values` copied into a vector whose buffer is guarded on `side` (exactly
/// `values.len()` elements: the last one ends at the guard page for [`Side::End`]).
fn guarded<T: Copy>(values: &[T], side: Side) -> Vec<T> {
    GUARD.with(|g| g.set(Some(side)));
    let mut v = Vec::with_capacity(values.len());
    GUARD.with(|g| g.set(None));
    v.extend_from_slice(values);
    assert_eq!(v.capacity(), values.len());
    v
}

/// Whether `t`'s storage is one of the guarded allocations (so the test is not vacuous).
fn is_guarded(t: &Tensor) -> bool {
    let p = t.storage().as_ptr() as usize;
    LIVE.lock().unwrap().iter().any(|e| e.0 == p)
}

/// `t`'s elements in a storage guarded on `side`.
fn guarded_tensor(t: &Tensor, side: Side) -> Tensor {
    let storage = match t.contiguous_storage() {
        Storage::F32(v) => Storage::F32(guarded(&v, side)),
        Storage::F64(v) => Storage::F64(guarded(&v, side)),
        Storage::U8(v) => Storage::U8(guarded(&v, side)),
        Storage::Bool(v) => Storage::Bool(guarded(&v, side)),
        Storage::I8(v) => Storage::I8(guarded(&v, side)),
        Storage::U16(v) => Storage::U16(guarded(&v, side)),
        Storage::I16(v) => Storage::I16(guarded(&v, side)),
        Storage::I32(v) => Storage::I32(guarded(&v, side)),
        Storage::U32(v) => Storage::U32(guarded(&v, side)),
    };
    Tensor::from_storage(storage, t.shape()).unwrap()
}

/// An output buffer for `want`, guarded on `side`, holding a different value at every
/// element (so an element the kernel does not write shows as a difference).
fn guarded_output(want: &Tensor, side: Side) -> Tensor {
    let storage = match want.contiguous_storage() {
        Storage::F32(v) => {
            let v: Vec<f32> = v.iter().map(|x| f32::from_bits(x.to_bits() ^ 1)).collect();
            Storage::F32(guarded(&v, side))
        }
        Storage::F64(v) => {
            let v: Vec<f64> = v.iter().map(|x| f64::from_bits(x.to_bits() ^ 1)).collect();
            Storage::F64(guarded(&v, side))
        }
        Storage::U8(v) => Storage::U8(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
        Storage::Bool(v) => {
            Storage::Bool(guarded(&v.iter().map(|x| x ^ 1).collect::<Vec<_>>(), side))
        }
        Storage::I8(v) => Storage::I8(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
        Storage::U16(v) => Storage::U16(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
        Storage::I16(v) => Storage::I16(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
        Storage::I32(v) => Storage::I32(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
        Storage::U32(v) => Storage::U32(guarded(&v.iter().map(|x| !x).collect::<Vec<_>>(), side)),
    };
    Tensor::from_storage(storage, want.shape()).unwrap()
}

/// The data an input holds: which of a kernel's forms runs on it.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Non-negative and clean (the integer-pick form of a float kernel).
    NonNeg,
    /// Clean, both signs (the clean form).
    Signed,
    /// With NaN, infinities and -0 (the general form).
    Nasty,
}

/// An input of `dtype` holding `kind` data (u8 and bool: any bytes).
fn input(dtype: DType, shape: &[usize], kind: Kind, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    match dtype {
        DType::F32 => {
            let data = match kind {
                Kind::Nasty => Data::Special,
                _ => Data::Uniform,
            };
            let t = f32_tensor(shape, data, seed).to_contiguous();
            match (kind, t.contiguous_storage()) {
                (Kind::NonNeg, Storage::F32(v)) => {
                    Tensor::from_f32(v.iter().map(|x| x.abs()).collect(), shape).unwrap()
                }
                _ => t,
            }
        }
        DType::U8 => Tensor::from_u8(
            (0..n)
                .map(|i| ((i as u64 * 37 + seed * 11) % 251) as u8)
                .collect(),
            shape,
        )
        .unwrap(),
        DType::Bool => Tensor::from_bool(
            (0..n)
                .map(|i| !(i as u64 * 7 + seed).is_multiple_of(10))
                .collect(),
            shape,
        )
        .unwrap(),
        _ => unreachable!("not used here"),
    }
}

type Case = (&'static str, &'static [(&'static str, &'static str)], DType);

const CASES: &[Case] = &[
    ("median_blur", &[("k", "3")], DType::F32),
    ("median_blur", &[("k", "5")], DType::F32),
    (
        "median_filter",
        &[("size", "3"), ("mode", "reflect")],
        DType::F32,
    ),
    (
        "median_filter",
        &[("size", "5"), ("mode", "constant"), ("cval", "0.5")],
        DType::F32,
    ),
    (
        "grey_erosion",
        &[("size", "15"), ("mode", "nearest")],
        DType::F32,
    ),
    (
        "grey_dilation",
        &[("size", "7"), ("mode", "constant"), ("cval", "-2")],
        DType::F32,
    ),
    (
        "grey_opening",
        &[("size", "3"), ("mode", "wrap")],
        DType::F32,
    ),
    ("grey_opening", &[("size", "15")], DType::F32),
    ("gradient_magnitude", &[], DType::F32),
    (
        "median_filter",
        &[("size", "3"), ("mode", "nearest")],
        DType::U8,
    ),
    (
        "median_filter",
        &[("size", "5"), ("mode", "mirror")],
        DType::U8,
    ),
    ("grey_erosion", &[("size", "15")], DType::U8),
    (
        "grey_opening",
        &[("size", "3"), ("mode", "constant")],
        DType::U8,
    ),
    ("binary_erosion", &[], DType::Bool),
];

/// Row widths: every one up to 80 (F32X4 paths), then the byte path's wide rows.
fn widths() -> Vec<usize> {
    (1..=80)
        .chain([95, 111, 127, 128, 129, 143, 160, 170])
        .collect()
}

#[test]
fn kernels_stay_inside_guarded_inputs_and_outputs() {
    // The first compile alone, and the tiered kernels once their background compile landed.
    let first = Engine::new().with_tiering(false);
    let tiered = Engine::new();
    let mut runs = 0;
    for &(op, params, dtype) in CASES {
        for w in widths() {
            for h in [1, 17] {
                let shape = [2, 1, h, w];
                let g = op_graph(op, params, dtype, &shape);
                let kinds: &[Kind] = if dtype == DType::F32 {
                    &[Kind::NonNeg, Kind::Signed, Kind::Nasty]
                } else {
                    &[Kind::NonNeg]
                };
                for &kind in kinds {
                    let x = input(dtype, &shape, kind, (w * 31 + h) as u64);
                    let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                    for (name, engine) in [("first", &first), ("tiered", &tiered)] {
                        let compiled = engine.compile(&g).unwrap();
                        if name == "tiered" {
                            assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
                        }
                        for side in [Side::End, Side::Start] {
                            let gx = guarded_tensor(&x, side);
                            let out = guarded_output(&want[0], side);
                            assert!(is_guarded(&gx) && is_guarded(&out));
                            let got = compiled
                                .run_into(engine, std::slice::from_ref(&gx), vec![out])
                                .unwrap_or_else(|e| panic!("{op} {params:?} {shape:?}: {e}"));
                            assert!(is_guarded(&got[0]), "run_into kept the output buffer");
                            if let Some(d) = first_difference(&want[0], &got[0]) {
                                panic!("{op} {params:?} {shape:?} {kind:?} {name} {side:?}: {d}");
                            }
                            runs += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(runs > 10_000, "{runs} runs");
}

/// `t`'s elements as a view cropped out of a bigger guarded buffer: with [`Side::End`] the
/// view is the buffer's last rows and columns (its last element is the buffer's last),
/// with [`Side::Start`] its first (its first element is the buffer's first). The buffer has
/// `extra` more columns per row and one more row per plane.
fn guarded_crop(t: &Tensor, side: Side, extra: usize) -> Tensor {
    let shape = t.shape().to_vec();
    let r = shape.len();
    let (h, w) = (shape[r - 2], shape[r - 1]);
    let (bh, bw) = (h + 1, w + extra);
    let planes: usize = shape[..r - 2].iter().product();
    let (dy, dx) = match side {
        Side::End => (1, extra),
        Side::Start => (0, 0),
    };
    // The buffer's elements: the view's where it lies, its first element elsewhere
    // (cropped away, never read).
    fn place<T: Copy>(v: &[T], g: [usize; 7]) -> Vec<T> {
        let [planes, h, w, bh, bw, dy, dx] = g;
        let mut big = vec![v[0]; planes * bh * bw];
        for p in 0..planes {
            for y in 0..h {
                let src = (p * h + y) * w;
                let dst = (p * bh + y + dy) * bw + dx;
                big[dst..dst + w].copy_from_slice(&v[src..src + w]);
            }
        }
        big
    }
    let g = [planes, h, w, bh, bw, dy, dx];
    let storage = match t.contiguous_storage() {
        Storage::F32(v) => Storage::F32(guarded(&place(&v, g), side)),
        Storage::F64(v) => Storage::F64(guarded(&place(&v, g), side)),
        Storage::U8(v) => Storage::U8(guarded(&place(&v, g), side)),
        Storage::Bool(v) => Storage::Bool(guarded(&place(&v, g), side)),
        Storage::I8(v) => Storage::I8(guarded(&place(&v, g), side)),
        Storage::U16(v) => Storage::U16(guarded(&place(&v, g), side)),
        Storage::I16(v) => Storage::I16(guarded(&place(&v, g), side)),
        Storage::I32(v) => Storage::I32(guarded(&place(&v, g), side)),
        Storage::U32(v) => Storage::U32(guarded(&place(&v, g), side)),
    };
    let mut strides = vec![0; r];
    strides[r - 1] = 1;
    strides[r - 2] = bw;
    strides[r - 3] = bh * bw;
    for k in (0..r - 3).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let offset = dy * bw + dx;
    Tensor::from_parts(std::sync::Arc::new(storage), &shape, &strides, offset).unwrap()
}

#[test]
fn kernels_stay_inside_guarded_cropped_views() {
    let engine = Engine::new();
    let mut runs = 0;
    for &(op, params, dtype) in CASES {
        for w in (1..=40).chain([70, 129]) {
            for h in [1, 17] {
                let shape = [2, 1, h, w];
                let g = op_graph(op, params, dtype, &shape);
                let compiled = engine.compile(&g).unwrap();
                assert!(compiled.wait_for_upgrades(Duration::from_secs(120)));
                let x = input(dtype, &shape, Kind::NonNeg, (w * 7 + h) as u64);
                let want = eager::run(&g, std::slice::from_ref(&x)).unwrap();
                for side in [Side::End, Side::Start] {
                    let view = guarded_crop(&x, side, 3);
                    assert!(is_guarded(&view) && !view.is_contiguous());
                    let got = compiled
                        .run(&engine, std::slice::from_ref(&view))
                        .unwrap_or_else(|e| panic!("{op} {params:?} {shape:?}: {e}"));
                    if let Some(d) = first_difference(&want[0], &got[0]) {
                        panic!("{op} {params:?} {shape:?} cropped {side:?}: {d}");
                    }
                    runs += 1;
                }
            }
        }
    }
    assert!(runs > 2_000, "{runs} runs");
}
