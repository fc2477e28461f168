//! One MoE layer's kernels on the GPU, in the order a step runs them:
//! each token's copy chosen by the dispatch rule's tables, the dispatch
//! (index, gather), every expert's GEMMs with SiLU, and the combine.

use super::*;

impl Gpu {
    /// Replica selection: `buf.phys[i]` = the physical slot of row `i`.
    pub fn select(&self, buf: &mut LayerBuffers, t: &SelectionTables) -> Result<()> {
        if let Some((rows, len)) = &t.rows {
            if *len != buf.rows() {
                return Err(Error::Argument(format!(
                    "a host selection of {len} rows for a batch of {}",
                    buf.rows()
                )));
            }
            let mut dst = buf.phys.slice_mut(0..*len);
            return self
                .stream
                .memcpy_dtod(&rows.slice(0..*len), &mut dst)
                .map_err(cuda("copying a host selection into place"));
        }
        if buf.experts_needed > t.num_experts {
            return Err(Error::Argument(format!(
                "the routing names expert {}, the layer has {}",
                buf.experts_needed - 1,
                t.num_experts
            )));
        }
        let n = to_u32(buf.tokens, "tokens")?;
        let k = to_u32(buf.top_k, "top-k")?;
        let rows = buf.rows() as u64;
        let (ids, phys) = (self.ptr(&buf.ids), self.ptr(&buf.phys));
        let launch = cfg(grid_for(rows, 256), 256);
        match &t.table {
            None => {
                let (cs, cl) = (self.ptr(&t.copy_start), self.ptr(&t.copy_slots));
                let mut b = self.stream.launch_builder(&self.k.select_vllm);
                b.arg(&ids)
                    .arg(&n)
                    .arg(&k)
                    .arg(&t.ranks)
                    .arg(&cs)
                    .arg(&cl)
                    .arg(&phys);
                // SAFETY: ids and phys hold `rows` values; routing ids were
                // checked below num_experts by the caller (Routing + select_cpu
                // share the check); copy tables are the layer's.
                unsafe { b.launch(launch) }.map_err(cuda("launching select_vllm"))?;
            }
            Some(table) => {
                let tp = self.ptr(table);
                let mut b = self.stream.launch_builder(&self.k.select_table);
                b.arg(&ids)
                    .arg(&n)
                    .arg(&k)
                    .arg(&t.ranks)
                    .arg(&t.num_experts)
                    .arg(&tp)
                    .arg(&phys);
                // SAFETY: as above; the table is ranks × experts.
                unsafe { b.launch(launch) }.map_err(cuda("launching select_table"))?;
            }
        }
        Ok(())
    }

    /// Dispatch index: counts, offsets, the stable permutation and its
    /// inverse, from `buf.phys` over `num_slots` slots.
    pub fn dispatch_index(&self, buf: &mut LayerBuffers, num_slots: u32) -> Result<()> {
        if num_slots as usize > buf.max_slots || num_slots == 0 {
            return Err(Error::Argument(format!(
                "{num_slots} slots for buffers of at most {}",
                buf.max_slots
            )));
        }
        let total = to_u32(buf.rows(), "rows")?;
        let n_chunks = total.div_ceil(CHUNK);
        self.stream
            .memset_zeros(&mut buf.counts)
            .map_err(cuda("clearing counts"))?;
        self.stream
            .memset_zeros(&mut buf.chunk)
            .map_err(cuda("clearing chunk counts"))?;
        let (phys, counts, offsets, chunk) = (
            self.ptr(&buf.phys),
            self.ptr(&buf.counts),
            self.ptr(&buf.offsets),
            self.ptr(&buf.chunk),
        );
        let (perm, dest) = (self.ptr(&buf.perm), self.ptr(&buf.dest));
        // SAFETY (all four launches): phys holds `total` slot ids below
        // num_slots (written by `select` from the layer's tables); counts
        // has num_slots values, offsets num_slots + 1, chunk n_chunks ×
        // num_slots, perm and dest `total`.
        let mut b = self.stream.launch_builder(&self.k.histogram);
        b.arg(&phys)
            .arg(&total)
            .arg(&num_slots)
            .arg(&counts)
            .arg(&chunk);
        unsafe { b.launch(cfg(grid_for(total as u64, 256), 256)) }
            .map_err(cuda("launching histogram"))?;
        let mut b = self.stream.launch_builder(&self.k.scan);
        b.arg(&counts).arg(&num_slots).arg(&offsets);
        unsafe { b.launch(cfg(1, 1024)) }.map_err(cuda("launching exclusive_scan"))?;
        let mut b = self.stream.launch_builder(&self.k.chunk_bases);
        b.arg(&chunk).arg(&n_chunks).arg(&num_slots).arg(&offsets);
        unsafe { b.launch(cfg(grid_for(num_slots as u64, 256), 256)) }
            .map_err(cuda("launching chunk_bases"))?;
        if total > 0 {
            let mut b = self.stream.launch_builder(&self.k.scatter);
            b.arg(&phys)
                .arg(&total)
                .arg(&num_slots)
                .arg(&chunk)
                .arg(&perm)
                .arg(&dest);
            unsafe { b.launch(cfg(n_chunks, CHUNK)) }.map_err(cuda("launching scatter_stable"))?;
        }
        Ok(())
    }

    /// The row gather: `xp[row] = x[perm[row] / top_k]`.
    pub fn gather(&self, buf: &LayerBuffers) -> Result<()> {
        let rows = to_u32(buf.rows(), "rows")?;
        if rows == 0 {
            return Ok(());
        }
        let h = to_u32(buf.shape.hidden, "hidden")?;
        let k = to_u32(buf.top_k, "top-k")?;
        let (x, perm, xp) = (self.ptr(&buf.x), self.ptr(&buf.perm), self.ptr(&buf.xp));
        let f = if h % 8 == 0 {
            &self.k.gather_v8
        } else {
            &self.k.gather
        };
        let mut b = self.stream.launch_builder(f);
        b.arg(&x).arg(&h).arg(&perm).arg(&k).arg(&rows).arg(&xp);
        // SAFETY: perm holds a permutation of 0..rows (from dispatch_index),
        // so perm / top_k < tokens; x is tokens × hidden, xp rows × hidden;
        // allocations are 256-byte aligned, so the 16-byte path is aligned
        // when hidden % 8 == 0.
        unsafe { b.launch(cfg(rows, 128)) }.map_err(cuda("launching gather_rows"))?;
        Ok(())
    }

    /// Everything of dispatch: index, then gather.
    pub fn dispatch(&self, buf: &mut LayerBuffers, num_slots: u32) -> Result<()> {
        self.dispatch_index(buf, num_slots)?;
        self.gather(buf)
    }

    /// `act = SiLU(gate) · up` for `rows` rows starting at row `first`.
    pub(super) fn silu_mul_rows(&self, buf: &LayerBuffers, first: u64, rows: u64) -> Result<()> {
        if rows == 0 {
            return Ok(());
        }
        let i = buf.shape.inter as u64;
        let y = self.ptr(&buf.y) + first * 2 * i * 2;
        let act = self.ptr(&buf.act) + first * i * 2;
        let inter = to_u32(buf.shape.inter, "inter")?;
        let mut b = self.stream.launch_builder(&self.k.silu_mul);
        b.arg(&y).arg(&rows).arg(&inter).arg(&act);
        // SAFETY: first + rows <= buffer rows (checked by the caller).
        unsafe { b.launch(cfg(grid_for(rows * i, 256), 256)) }
            .map_err(cuda("launching silu_mul"))?;
        Ok(())
    }

    pub(super) fn gemm(&self, g: GemmTn, what: &str) -> Result<()> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: the caller computed every address and leading dimension
        // from checked sizes: A is k × m (lda ≥ k), B k × n (ldb ≥ k), C
        // m × n (ldc ≥ m), all inside their buffers.
        unsafe {
            cudarc::cublas::result::gemm_ex(
                *self.blas.handle(),
                blas_sys::cublasOperation_t::CUBLAS_OP_T,
                blas_sys::cublasOperation_t::CUBLAS_OP_N,
                g.m,
                g.n,
                g.k,
                (&alpha) as *const f32 as *const _,
                g.a as *const _,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                g.lda,
                g.b as *const _,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                g.ldb,
                (&beta) as *const f32 as *const _,
                g.c as *mut _,
                blas_sys::cudaDataType_t::CUDA_R_16BF,
                g.ldc,
                blas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(cuda(format!(
            "cuBLAS gemm_ex ({what}: m {} n {} k {} lda {} ldb {} ldc {})",
            g.m, g.n, g.k, g.lda, g.ldb, g.ldc
        )))
    }

    /// Expert compute of simulated rank `g`: for each copy GPU `g` hosts,
    /// its rows through gate/up (one GEMM), then SiLU·up over the rank's
    /// rows (one kernel), then down (one GEMM per copy). `offsets` are the
    /// dispatch offsets (host copy).
    pub fn experts_rank(
        &self,
        buf: &LayerBuffers,
        w: &DeviceWeights,
        slots: &LayerSlots,
        offsets: &[u32],
        g: usize,
    ) -> Result<()> {
        check_offsets(offsets, slots.num_slots(), buf.rows())?;
        if w.shape != buf.shape {
            return Err(Error::Argument(
                "weights and buffers of different shapes".into(),
            ));
        }
        let range = slots.gpu_slots(g);
        let (first, last) = (offsets[range.start] as u64, offsets[range.end] as u64);
        if first == last {
            return Ok(());
        }
        let (h, i) = (buf.shape.hidden as u64, buf.shape.inter as u64);
        let (hh, ii) = (h as i32, i as i32);
        let (w13, w2) = (self.ptr(&w.w13), self.ptr(&w.w2));
        let (xp, y, act, out) = (
            self.ptr(&buf.xp),
            self.ptr(&buf.y),
            self.ptr(&buf.act),
            self.ptr(&buf.out),
        );
        for s in range.clone() {
            let (a, n) = (offsets[s] as u64, (offsets[s + 1] - offsets[s]) as i32);
            if n == 0 {
                continue;
            }
            let p = (slots.slot_expert[s] as usize % w.pool) as u64;
            let gemm = GemmTn {
                m: 2 * ii,
                n,
                k: hh,
                a: w13 + p * 2 * i * h * 2,
                lda: hh,
                b: xp + a * h * 2,
                ldb: hh,
                c: y + a * 2 * i * 2,
                ldc: 2 * ii,
            };
            self.gemm(gemm, "gate/up")?;
        }
        self.silu_mul_rows(buf, first, last - first)?;
        for s in range {
            let (a, n) = (offsets[s] as u64, (offsets[s + 1] - offsets[s]) as i32);
            if n == 0 {
                continue;
            }
            let p = (slots.slot_expert[s] as usize % w.pool) as u64;
            let gemm = GemmTn {
                m: hh,
                n,
                k: ii,
                a: w2 + p * h * i * 2,
                lda: ii,
                b: act + a * i * 2,
                ldb: ii,
                c: out + a * h * 2,
                ldc: hh,
            };
            self.gemm(gemm, "down")?;
        }
        Ok(())
    }

    /// The combine: `comb[t] = Σ_k w[t][k] · out[dest[t·K + k]]`.
    pub fn combine(&self, buf: &LayerBuffers) -> Result<()> {
        let n = to_u32(buf.tokens, "tokens")?;
        let h = to_u32(buf.shape.hidden, "hidden")?;
        let k = to_u32(buf.top_k, "top-k")?;
        let (out, dest, w, comb) = (
            self.ptr(&buf.out),
            self.ptr(&buf.dest),
            self.ptr(&buf.w),
            self.ptr(&buf.comb),
        );
        let block = h.next_multiple_of(32).min(256);
        let mut b = self.stream.launch_builder(&self.k.combine);
        b.arg(&out)
            .arg(&h)
            .arg(&dest)
            .arg(&w)
            .arg(&n)
            .arg(&k)
            .arg(&comb);
        // SAFETY: dest holds rows values below rows (from dispatch_index);
        // out is rows × hidden, w rows, comb tokens × hidden.
        unsafe { b.launch(cfg(n, block)) }.map_err(cuda("launching combine"))?;
        Ok(())
    }

    /// A plain `rows × hidden` by `hidden × out` bf16 GEMM on the given
    /// buffers (the micro-benchmark's reference square product):
    /// `c (out × rows) = aᵀ · b` column-major.
    pub fn gemm_plain(
        &self,
        a: &CudaSlice<u16>,
        b: &CudaSlice<u16>,
        c: &mut CudaSlice<u16>,
        dims: (usize, usize, usize),
    ) -> Result<()> {
        let (m, n, k) = dims;
        if a.len() < m * k || b.len() < k * n || c.len() < m * n {
            return Err(Error::Argument("GEMM buffers too small".into()));
        }
        let d = |x: usize| i32::try_from(x).map_err(|_| Error::Argument("GEMM too large".into()));
        let g = GemmTn {
            m: d(m)?,
            n: d(n)?,
            k: d(k)?,
            a: self.ptr(a),
            lda: d(k)?,
            b: self.ptr(b),
            ldb: d(k)?,
            c: self.ptr(c),
            ldc: d(m)?,
        };
        self.gemm(g, "reference")
    }
}
