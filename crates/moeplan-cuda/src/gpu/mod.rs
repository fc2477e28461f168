//! The GPU side: one device, one stream, the NVRTC-compiled kernels of
//! `kernels.cu` and a cuBLAS handle.
//!
//! Everything runs on the context's default stream, in order, so no
//! cross-stream synchronisation is needed (cudarc's per-buffer event
//! tracking is switched off). Device pointers travel to kernels as plain
//! 64-bit values, which lets the expert stage address each copy's rows
//! inside one buffer; every such address is computed from sizes checked on
//! the host first.
//!
//! cuBLAS is column-major. A row-major `r × c` matrix is, to cuBLAS, a
//! column-major `c × r` one with leading dimension `c`. So with row-major
//! `x` (`rows × hidden`) and `w13` (`2·inter × hidden`), `y = x · w13ᵀ`
//! (row-major `rows × 2·inter`) is the column-major product
//! `yᶜ (2·inter × rows) = w13ᶜᵀ · xᶜ` — `transa = T`, `transb = N`,
//! `m = 2·inter`, `n = rows`, `k = hidden`, `lda = ldb = hidden`,
//! `ldc = 2·inter`. The down projection is the same with `w2`
//! (`hidden × inter`): `m = hidden`, `k = inter`, `lda = ldb = inter`,
//! `ldc = hidden`.

use std::sync::Arc;

use cudarc::cublas::{CudaBlas, sys as blas_sys};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PushKernelArg, ValidAsZeroBits, sys as drv_sys,
};

use crate::error::{Error, Result, cuda};
use crate::expert::{ExpertShape, seeds};
use crate::routing::Routing;
use crate::select::{LayerSlots, Selector};

mod layer;

/// The kernels' source.
pub const KERNELS: &str = include_str!("kernels.cu");

/// Rows per block of the stable scatter (`CHUNK` in `kernels.cu`).
pub const CHUNK: u32 = 256;

/// What the device says about itself.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    /// Device name.
    pub name: String,
    /// Compute capability (major, minor).
    pub cc: (i32, i32),
    /// Streaming multiprocessors.
    pub sms: i32,
    /// Peak SM clock in kHz, when reported.
    pub clock_khz: Option<i32>,
    /// Peak memory clock in kHz, when reported.
    pub mem_clock_khz: Option<i32>,
    /// Memory bus width in bits, when reported.
    pub bus_width_bits: Option<i32>,
    /// Device memory in bytes.
    pub total_mem: usize,
}

impl DeviceInfo {
    /// Theoretical memory bandwidth in bytes/s: `2 × memory clock × bus
    /// width` (double data rate), when the driver reports both.
    pub fn peak_bandwidth(&self) -> Option<f64> {
        let clk = self.mem_clock_khz.filter(|&c| c > 0)? as f64 * 1e3;
        let bits = self.bus_width_bits.filter(|&b| b > 0)? as f64;
        Some(2.0 * clk * bits / 8.0)
    }

    /// Dense bf16 tensor-core peak in FLOP/s and where the figure comes from:
    /// the datasheet for known parts, else SMs × clock × the architecture's
    /// bf16 FLOPs per SM per clock.
    pub fn peak_bf16(&self) -> Option<(f64, String)> {
        let n = self.name.to_ascii_uppercase();
        let sheet = [
            ("H100 PCIE", 756e12),
            ("H100 NVL", 835e12),
            ("H100", 989.4e12),
            ("H200", 989.4e12),
            ("H20", 148e12),
            ("GH200", 989.4e12),
            ("A100", 312e12),
            ("B200", 2250e12),
        ];
        if let Some(&(part, f)) = sheet.iter().find(|(p, _)| n.contains(p)) {
            return Some((f, format!("{part} datasheet, dense")));
        }
        let per_sm_clk = match self.cc {
            (9, 0) => 4096.0,
            (8, 0) => 2048.0,
            (10, 0) => 8192.0,
            (8, _) | (12, _) => 1024.0,
            _ => return None,
        };
        let clk = self.clock_khz.filter(|&c| c > 0)? as f64 * 1e3;
        Some((
            self.sms as f64 * clk * per_sm_clk,
            format!(
                "estimate: {} SMs × {:.0} MHz × {per_sm_clk} FLOP/clk",
                self.sms,
                clk / 1e6
            ),
        ))
    }

    /// One line for reports.
    pub fn describe(&self) -> String {
        format!(
            "{} · sm_{}{} · {} SMs · {:.1} GiB",
            self.name,
            self.cc.0,
            self.cc.1,
            self.sms,
            self.total_mem as f64 / (1u64 << 30) as f64
        )
    }
}

/// Checks that the CUDA libraries this crate loads can be loaded.
pub fn libraries_present() -> Result<()> {
    // SAFETY: each call only tries to dlopen the library under its usual
    // names and closes it again; no symbol is called.
    let (driver, nvrtc, blas) = unsafe {
        (
            cudarc::driver::sys::is_culib_present(),
            cudarc::nvrtc::sys::is_culib_present(),
            cudarc::cublas::sys::is_culib_present(),
        )
    };
    let missing = |lib: &str, dir: &str| {
        Error::NoDevice(format!(
            "{lib} cannot be loaded (not installed, or its folder — usually {dir} — is not on LD_LIBRARY_PATH)"
        ))
    };
    if !driver {
        return Err(missing(
            "the CUDA driver library libcuda.so.1",
            "/usr/local/nvidia/lib64 or /usr/lib/x86_64-linux-gnu",
        ));
    }
    if !nvrtc {
        return Err(missing(
            "NVRTC (libnvrtc.so.13)",
            "/usr/local/cuda/targets/x86_64-linux/lib",
        ));
    }
    if !blas {
        return Err(missing(
            "cuBLAS (libcublas.so.13)",
            "/usr/local/cuda/targets/x86_64-linux/lib",
        ));
    }
    Ok(())
}

/// Compiles the kernels with NVRTC to PTX for compute capability `cc`.
/// Needs only NVRTC, no device.
pub fn compile_kernels(cc: (i32, i32)) -> Result<cudarc::nvrtc::Ptx> {
    // SAFETY: as in `libraries_present`.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(Error::NoDevice(
            "NVRTC (libnvrtc.so.13) cannot be loaded".into(),
        ));
    }
    let arch = format!("--gpu-architecture=compute_{}{}", cc.0, cc.1);
    let opts = cudarc::nvrtc::CompileOptions {
        options: vec![arch.clone()],
        ..Default::default()
    };
    cudarc::nvrtc::compile_ptx_with_opts(KERNELS, opts).map_err(|e| match e {
        cudarc::nvrtc::CompileError::CompileError { nvrtc, log, .. } => Error::Cuda(format!(
            "NVRTC could not compile the kernels ({arch}, {nvrtc:?}):\n{}",
            log.to_string_lossy()
        )),
        other => Error::Cuda(format!("NVRTC ({arch}): {other:?}")),
    })
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}

struct Kernels {
    fill: CudaFunction,
    select_vllm: CudaFunction,
    select_table: CudaFunction,
    histogram: CudaFunction,
    scan: CudaFunction,
    chunk_bases: CudaFunction,
    scatter: CudaFunction,
    gather: CudaFunction,
    gather_v8: CudaFunction,
    silu_mul: CudaFunction,
    combine: CudaFunction,
    spin: CudaFunction,
}

impl Kernels {
    fn load(module: &Arc<CudaModule>) -> Result<Self> {
        let f = |name: &str| {
            module
                .load_function(name)
                .map_err(cuda(format!("loading kernel {name}")))
        };
        Ok(Kernels {
            fill: f("fill_uniform_bf16")?,
            select_vllm: f("select_vllm")?,
            select_table: f("select_table")?,
            histogram: f("histogram")?,
            scan: f("exclusive_scan")?,
            chunk_bases: f("chunk_bases")?,
            scatter: f("scatter_stable")?,
            gather: f("gather_rows")?,
            gather_v8: f("gather_rows_v8")?,
            silu_mul: f("silu_mul")?,
            combine: f("combine")?,
            spin: f("spin")?,
        })
    }
}

/// One column-major `C = op(A) · B` in bf16 with f32 accumulation;
/// `op(A) = Aᵀ` (see the module docs for the row-major mapping).
#[derive(Debug, Clone, Copy)]
struct GemmTn {
    m: i32,
    n: i32,
    k: i32,
    a: u64,
    lda: i32,
    b: u64,
    ldb: i32,
    c: u64,
    ldc: i32,
}

fn grid_for(n: u64, block: u32) -> u32 {
    n.div_ceil(block as u64).clamp(1, 1 << 20) as u32
}

fn cfg(grid: u32, block: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid, 1, 1),
        block_dim: (block, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn to_u32(n: usize, what: &str) -> Result<u32> {
    u32::try_from(n).map_err(|_| Error::Argument(format!("{what} = {n} does not fit 32 bits")))
}

/// An open device: context, stream, kernels, cuBLAS.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    k: Kernels,
    _module: Arc<CudaModule>,
    /// What the device is.
    pub info: DeviceInfo,
}

impl Gpu {
    /// Opens device `ordinal`: checks the libraries, creates the context,
    /// compiles the kernels for the device's architecture, creates cuBLAS.
    /// A missing library or device is [`Error::NoDevice`].
    pub fn open(ordinal: usize) -> Result<Gpu> {
        libraries_present()?;
        let ctx = std::panic::catch_unwind(|| CudaContext::new(ordinal))
            .map_err(|p| Error::NoDevice(format!("the CUDA driver failed: {}", panic_text(&*p))))?
            .map_err(|e| {
                Error::NoDevice(format!(
                    "the CUDA driver found no usable GPU {ordinal}: {e:?}"
                ))
            })?;
        // SAFETY: everything below runs on the one default stream, in order,
        // so buffers need no cross-stream events.
        unsafe { ctx.disable_event_tracking() };
        let attr = |a: drv_sys::CUdevice_attribute| ctx.attribute(a).ok();
        use drv_sys::CUdevice_attribute as A;
        let info = DeviceInfo {
            name: ctx.name().map_err(cuda("reading the device name"))?,
            cc: ctx
                .compute_capability()
                .map_err(cuda("reading the compute capability"))?,
            sms: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).unwrap_or(0),
            clock_khz: attr(A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
            mem_clock_khz: attr(A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE),
            bus_width_bits: attr(A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            total_mem: ctx.total_mem().map_err(cuda("reading the memory size"))?,
        };
        let ptx = compile_kernels(info.cc)?;
        let module = ctx
            .load_module(ptx)
            .map_err(cuda("loading the compiled kernels"))?;
        let k = Kernels::load(&module)?;
        let stream = ctx.default_stream();
        let blas = CudaBlas::new(stream.clone()).map_err(cuda("creating the cuBLAS handle"))?;
        Ok(Gpu {
            ctx,
            stream,
            blas,
            k,
            _module: module,
            info,
        })
    }

    /// Waits for everything queued; an asynchronous kernel fault surfaces here.
    pub fn sync(&self, after: &str) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(cuda(format!("waiting for {after}")))
    }

    /// Bytes free and in all on the device.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(cuda("reading free memory"))
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        let (p, _guard) = s.device_ptr(&self.stream);
        p
    }

    /// A zeroed device buffer of `len` values (at least one).
    pub fn zeros<T: DeviceRepr + ValidAsZeroBits>(&self, len: usize) -> Result<CudaSlice<T>> {
        self.stream
            .alloc_zeros::<T>(len.max(1))
            .map_err(cuda(format!(
                "allocating {len} values ({} MiB)",
                (len * std::mem::size_of::<T>()) >> 20
            )))
    }

    /// Copies host values to a new device buffer.
    pub fn upload<T: DeviceRepr + ValidAsZeroBits>(&self, v: &[T]) -> Result<CudaSlice<T>> {
        if v.is_empty() {
            return self.zeros(1);
        }
        self.stream
            .clone_htod(v)
            .map_err(cuda(format!("copying {} values to the device", v.len())))
    }

    /// Copies host values into the start of a device buffer.
    pub fn write<T: DeviceRepr>(&self, dst: &mut CudaSlice<T>, v: &[T]) -> Result<()> {
        if v.len() > dst.len() {
            return Err(Error::Argument(format!(
                "{} values do not fit a buffer of {}",
                v.len(),
                dst.len()
            )));
        }
        if v.is_empty() {
            return Ok(());
        }
        let mut view = dst.slice_mut(0..v.len());
        self.stream
            .memcpy_htod(v, &mut view)
            .map_err(cuda("copying to the device"))
    }

    /// Copies the first `len` values of a device buffer back.
    pub fn read<T: DeviceRepr>(&self, s: &CudaSlice<T>, len: usize) -> Result<Vec<T>> {
        if len > s.len() {
            return Err(Error::Argument(format!(
                "reading {len} values of a buffer of {}",
                s.len()
            )));
        }
        if len == 0 {
            return Ok(Vec::new());
        }
        self.stream
            .clone_dtoh(&s.slice(0..len))
            .map_err(cuda(format!("copying {len} values from the device")))
    }

    /// A timing event.
    pub fn event(&self) -> Result<CudaEvent> {
        self.ctx
            .new_event(Some(drv_sys::CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(cuda("creating an event"))
    }

    /// Runs `f` between two events and returns the GPU time in milliseconds.
    pub fn time(&self, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
        let (a, b) = (self.event()?, self.event()?);
        a.record(&self.stream).map_err(cuda("recording an event"))?;
        f()?;
        b.record(&self.stream).map_err(cuda("recording an event"))?;
        let ms = a.elapsed_ms(&b).map_err(cuda("timing with events"))?;
        Ok(ms as f64)
    }

    /// Keeps the GPU busy for about `us` microseconds (SM clock cycles at
    /// the reported peak clock).
    pub fn spin(&self, us: f64) -> Result<()> {
        let khz = self.info.clock_khz.filter(|&c| c > 0).unwrap_or(1_500_000) as f64;
        let cycles = (us * khz / 1e3) as i64;
        let mut b = self.stream.launch_builder(&self.k.spin);
        b.arg(&cycles);
        // SAFETY: touches no memory.
        unsafe { b.launch(cfg(1, 1)) }.map_err(cuda("launching spin"))?;
        Ok(())
    }

    /// [`Gpu::time`] after a 1 ms [`Gpu::spin`]: the host queues `f`'s
    /// launches while the GPU spins, so the events measure the kernels
    /// back to back — GPU execution without host launch gaps, as under a
    /// CUDA graph.
    pub fn time_queued(&self, f: impl FnMut() -> Result<()>) -> Result<f64> {
        self.spin(1000.0)?;
        self.time(f)
    }

    /// Device-to-device copy of `bytes` (a bandwidth reference).
    pub fn copy(&self, dst: &mut CudaSlice<u8>, src: &CudaSlice<u8>) -> Result<()> {
        self.stream
            .memcpy_dtod(src, dst)
            .map_err(cuda("device-to-device copy"))
    }

    /// Fills `n` values at device address `p` with the hash stream `seed`
    /// scaled by `scale` ([`crate::expert::hash_unit`]).
    fn fill_at(&self, p: u64, n: u64, seed: u32, scale: f32) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let mut b = self.stream.launch_builder(&self.k.fill);
        b.arg(&p).arg(&n).arg(&seed).arg(&scale);
        // SAFETY: p addresses at least n bf16 values (callers pass a buffer's
        // start and a length within it).
        unsafe { b.launch(cfg(grid_for(n, 256), 256)) }
            .map_err(cuda("launching fill_uniform_bf16"))?;
        Ok(())
    }

    /// Fills a whole buffer with the hash stream `seed`.
    pub fn fill(&self, buf: &mut CudaSlice<u16>, seed: u32, scale: f32) -> Result<()> {
        let p = self.ptr(buf);
        self.fill_at(p, buf.len() as u64, seed, scale)
    }

    /// Generated expert weights: `pool` sets of `shape`.
    pub fn weights(&self, shape: ExpertShape, pool: usize) -> Result<DeviceWeights> {
        let pool = pool.max(1);
        let mut w13 = self.zeros::<u16>(pool * shape.w13_len())?;
        let mut w2 = self.zeros::<u16>(pool * shape.w2_len())?;
        self.fill(&mut w13, seeds::W13, shape.w13_scale())?;
        self.fill(&mut w2, seeds::W2, shape.w2_scale())?;
        Ok(DeviceWeights {
            shape,
            pool,
            w13,
            w2,
        })
    }

    /// Device buffers for one layer of `tokens × top_k` rows over at most
    /// `max_slots` slots.
    pub fn buffers(
        &self,
        tokens: usize,
        top_k: usize,
        shape: ExpertShape,
        max_slots: usize,
    ) -> Result<LayerBuffers> {
        let rows = tokens
            .checked_mul(top_k)
            .filter(|&r| r <= crate::routing::MAX_ROWS)
            .ok_or_else(|| Error::Argument(format!("{tokens} × {top_k} rows is too many")))?;
        to_u32(max_slots, "slots")?;
        let (h, i) = (shape.hidden, shape.inter);
        let n_chunks = rows.div_ceil(CHUNK as usize);
        Ok(LayerBuffers {
            tokens,
            top_k,
            shape,
            max_slots,
            x: self.zeros(tokens * h)?,
            ids: self.zeros(rows)?,
            w: self.zeros(rows)?,
            phys: self.zeros(rows)?,
            counts: self.zeros(max_slots)?,
            offsets: self.zeros(max_slots + 1)?,
            chunk: self.zeros(n_chunks.max(1) * max_slots)?,
            perm: self.zeros(rows)?,
            dest: self.zeros(rows)?,
            xp: self.zeros(rows * h)?,
            y: self.zeros(rows * 2 * i)?,
            act: self.zeros(rows * i)?,
            out: self.zeros(rows * h)?,
            comb: self.zeros(tokens * h)?,
            experts_needed: 0,
        })
    }

    /// Uploads a routing (ids and gate weights) into `buf`.
    pub fn upload_routing(&self, buf: &mut LayerBuffers, routing: &Routing) -> Result<()> {
        if routing.tokens != buf.tokens || routing.top_k != buf.top_k {
            return Err(Error::Argument(format!(
                "routing of {} × top-{} for buffers of {} × top-{}",
                routing.tokens, routing.top_k, buf.tokens, buf.top_k
            )));
        }
        self.write(&mut buf.ids, &routing.ids)?;
        self.write(&mut buf.w, &routing.weights)?;
        buf.experts_needed = routing.ids.iter().max().map_or(0, |&e| e + 1);
        Ok(())
    }

    /// Fills the token activations `x` with the generated stream.
    pub fn fill_tokens(&self, buf: &mut LayerBuffers) -> Result<()> {
        self.fill(&mut buf.x, seeds::X, 1.0)
    }

    /// Uploads explicit token activations (`tokens × hidden`).
    pub fn upload_tokens(&self, buf: &mut LayerBuffers, x: &[u16]) -> Result<()> {
        if x.len() != buf.tokens * buf.shape.hidden {
            return Err(Error::Argument(format!(
                "{} activations for {} tokens of {}",
                x.len(),
                buf.tokens,
                buf.shape.hidden
            )));
        }
        self.write(&mut buf.x, x)
    }

    /// Device tables a selection needs, uploaded once per layer and rule.
    pub fn selection_tables(
        &self,
        slots: &LayerSlots,
        selector: &Selector,
    ) -> Result<SelectionTables> {
        Ok(SelectionTables {
            table: match selector {
                Selector::Vllm => None,
                Selector::Shares(_) | Selector::Libra { .. } => {
                    return Err(Error::Argument(
                        "GRACE's and Libra's selections are realised on the host: use host_selection_tables".into(),
                    ));
                }
                Selector::Table(t) => {
                    if t.len() != slots.num_gpus() * slots.num_experts
                        || t.iter().any(|&s| s as usize >= slots.num_slots())
                    {
                        return Err(Error::Argument(
                            "dispatch table of the wrong size or naming a missing slot".into(),
                        ));
                    }
                    Some(self.upload(t)?)
                }
            },
            ..self.copy_tables(slots)?
        })
    }

    /// The layer's copy lists on the device, no table, no host rows.
    fn copy_tables(&self, slots: &LayerSlots) -> Result<SelectionTables> {
        Ok(SelectionTables {
            ranks: to_u32(slots.num_gpus(), "GPUs")?,
            num_experts: to_u32(slots.num_experts, "experts")?,
            num_slots: to_u32(slots.num_slots(), "slots")?,
            copy_start: self.upload(&slots.copy_start)?,
            copy_slots: self.upload(&slots.copy_slots)?,
            table: None,
            rows: None,
        })
    }

    /// Tables for a selection made on the host ([`Selector::on_host`]):
    /// `phys`, one slot per row from [`crate::select::select_cpu`], which
    /// [`Gpu::select`] then copies into place on the device.
    pub fn host_selection_tables(
        &self,
        slots: &LayerSlots,
        phys: &[u32],
    ) -> Result<SelectionTables> {
        if phys.iter().any(|&s| s as usize >= slots.num_slots()) {
            return Err(Error::Argument(
                "a host selection names a missing slot".into(),
            ));
        }
        Ok(SelectionTables {
            rows: Some((self.upload(phys)?, phys.len())),
            ..self.copy_tables(slots)?
        })
    }
}

fn check_offsets(offsets: &[u32], num_slots: usize, rows: usize) -> Result<()> {
    if offsets.len() != num_slots + 1
        || offsets.windows(2).any(|w| w[0] > w[1])
        || offsets.last().copied() != Some(rows as u32)
        || offsets[0] != 0
    {
        return Err(Error::Cuda(format!(
            "dispatch offsets are inconsistent ({} entries for {num_slots} slots, last {:?}, {rows} rows)",
            offsets.len(),
            offsets.last()
        )));
    }
    Ok(())
}

/// Expert weights on the device: `pool` generated sets.
pub struct DeviceWeights {
    /// Sizes.
    pub shape: ExpertShape,
    /// Distinct sets; expert `e` uses set `e mod pool`.
    pub pool: usize,
    /// `pool × 2·inter × hidden`.
    pub w13: CudaSlice<u16>,
    /// `pool × hidden × inter`.
    pub w2: CudaSlice<u16>,
}

/// A layer's copy tables on the device.
pub struct SelectionTables {
    ranks: u32,
    num_experts: u32,
    /// Slots in the layer.
    pub num_slots: u32,
    copy_start: CudaSlice<u32>,
    copy_slots: CudaSlice<u32>,
    table: Option<CudaSlice<u32>>,
    /// A host-made selection and its row count.
    rows: Option<(CudaSlice<u32>, usize)>,
}

/// Device buffers of one layer's batch.
pub struct LayerBuffers {
    /// Tokens.
    pub tokens: usize,
    /// Experts per token.
    pub top_k: usize,
    /// Expert sizes.
    pub shape: ExpertShape,
    /// Most slots a layer may have.
    pub max_slots: usize,
    /// Token activations, `tokens × hidden`.
    pub x: CudaSlice<u16>,
    /// Routed experts, `rows`.
    pub ids: CudaSlice<u32>,
    /// Gate weights, `rows`.
    pub w: CudaSlice<f32>,
    /// Selected physical slot, `rows`.
    pub phys: CudaSlice<u32>,
    /// Rows per slot.
    pub counts: CudaSlice<u32>,
    /// Exclusive offsets per slot, plus the total.
    pub offsets: CudaSlice<u32>,
    /// Per-(chunk, slot) counts, then bases.
    pub chunk: CudaSlice<u32>,
    /// Row → flattened (token, k).
    pub perm: CudaSlice<u32>,
    /// Flattened (token, k) → row.
    pub dest: CudaSlice<u32>,
    /// Dispatched activations, `rows × hidden`.
    pub xp: CudaSlice<u16>,
    /// Gate/up output, `rows × 2·inter`.
    pub y: CudaSlice<u16>,
    /// SiLU(gate)·up, `rows × inter`.
    pub act: CudaSlice<u16>,
    /// Expert outputs, `rows × hidden`.
    pub out: CudaSlice<u16>,
    /// Combined output, `tokens × hidden` (f32).
    pub comb: CudaSlice<f32>,
    /// One more than the largest expert id of the uploaded routing.
    experts_needed: u32,
}

impl LayerBuffers {
    /// Rows (`tokens × top_k`).
    pub fn rows(&self) -> usize {
        self.tokens * self.top_k
    }
}
