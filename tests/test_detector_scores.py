"""The detectors' scores held where they are (benchmarks/detector_bench.py prints the tables): the project
corpus with the naive baselines, the tune half of the public corpus, and the held-out half's totals.

The public kernels are other people's code, so the repository keeps their manifest, not their text: they
are read from tests/detector_corpus_public/{tune,heldout}/ when written there, else written from the
repositories' mirrors at $CUDA_LLM_PUBLIC_MIRROR (materialize.py); without either, those tests skip.
Their builds (SASS, ptxas) are recorded in tests/fixtures/detector_artifacts/ and used when present.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tomllib
from pathlib import Path

import pytest

from cuda_llm.feature_db import load_catalogue
from cuda_llm.feature_db.detector_eval import CorpusKernel, detect_kernel, load_corpus, recorded_build, score, totals
from cuda_llm.tasks import load_all

TESTS = Path(__file__).parent
PUBLIC = TESTS / "detector_corpus_public"
CATALOGUE = load_catalogue()
IDS = {f.id for f in CATALOGUE}

# Floors a rule change must not fall below (measured: project 1.00 / 1.00; tuning data, batches 1-6 whole since
# the held-out halves of batches 2-6 were retired into it, and batch 7's tune half, 0.98 / 0.98).
PROJECT_FLOOR = (0.99, 0.99)
TUNE_FLOOR = (0.98, 0.98)
TUNE_FEATURE_RECALL = 0.9            # every tuning feature with support >= 3, but for those below, held where measured:
TUNE_KNOWN_LOW = {"persistent_kernel": 0.9, "single_pass_row": 0.8, "privatized_atomics": 0.88}
# The held-out readings (precision, recall) of each group of batches still held out, as first measured for the
# rules they were read with (tests/detector_corpus_public/README.md); a rule change must not fall below them.
# Batches 2-6 were read and retired into the tuning data (batch 5 read twice, 0.95 / 0.92 then 0.95 / 0.96;
# batch 6 first 0.94 / 0.86; the two together a last time before retiring, 0.95 / 0.94); batch 7 is held out
# (its first reading, 2026-11-26: 0.95 / 0.95, every feature with support >= 3 at recall >= 0.8).
HELD_OUT_READINGS: dict[tuple[int, ...], tuple[float, float]] = {(7,): (0.95, 0.95)}


def _project() -> list[CorpusKernel]:
    corpus = TESTS / "detector_corpus"
    labels = tomllib.loads((corpus / "baselines.toml").read_text())
    base = [CorpusKernel(name=f"baseline:{lt.task.name}", path=lt.task.baseline_path,
                         labels=frozenset(labels.get(lt.task.name, ())), source=lt.task.baseline_path.read_text())
            for lt in load_all()]
    return load_corpus(corpus, IDS) + base


def _materialize():
    spec = importlib.util.spec_from_file_location("public_corpus", PUBLIC / "materialize.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def public(tmp_path_factory):
    """"tune" (the tuning data: batch 1 whole, later batches' tune halves) and "heldout" (the heldout halves
    of the batches still held out) -> their kernels with the recorded builds, written from the mirrors when not here;
    "batch" -> each kernel's batch."""
    mod = _materialize()
    if all(any((PUBLIC / h).glob("*.cu")) for h in mod.HALVES):
        root = PUBLIC
    elif os.environ.get("CUDA_LLM_PUBLIC_MIRROR"):
        root = tmp_path_factory.mktemp("public")
        mod.main(["--mirror", os.environ["CUDA_LLM_PUBLIC_MIRROR"], "--out", str(root)])
    else:
        pytest.skip("the public corpus is not written here: run tests/detector_corpus_public/materialize.py "
                    "or set CUDA_LLM_PUBLIC_MIRROR")
    entries = mod.load_manifest()
    where = {e.name: mod.scored_as(e) for e in entries}
    out: dict = {"tune": [], "heldout": [], "batch": {e.name: e.batch for e in entries}}
    for half in mod.HALVES:
        for k in load_corpus(root / half, IDS):
            # builds recorded for the repository's folder, whichever folder the sources were written to
            out[where[k.name]].append(k.model_copy(update={"build": recorded_build(PUBLIC / half, k.name)}))
    return out


def test_the_project_corpus_does_not_regress():
    t = totals(score(_project(), CATALOGUE))
    assert t.precision >= PROJECT_FLOOR[0] and t.recall >= PROJECT_FLOOR[1], t


def test_the_tune_half_does_not_regress(public):
    kernels = public["tune"]
    assert all(k.build is not None for k in kernels), "record: python benchmarks/record_detector_artifacts.py"
    scores = score(kernels, CATALOGUE)
    t = totals(scores)
    assert t.precision >= TUNE_FLOOR[0] and t.recall >= TUNE_FLOOR[1], t
    low = {s.feature: s.recall for s in scores
           if s.support >= 3 and s.recall < TUNE_KNOWN_LOW.get(s.feature, TUNE_FEATURE_RECALL)}
    assert not low


# Where the build and the source rules disagree on the tuning data, and why (the build is right every time).
TUNE_BUILD_DISAGREES = {
    # `half` storage fed to WMMA / mma.sync with fp32 conversion kernels or half accumulators: the source
    # names no conversion intrinsic, the build packs fp32 into half (F2FP) or accumulates in half (HMMA.F16)
    ("gemm_blog_simple_wmma", "reduced_precision"): "build",
    ("gemm_hg_mma_async_stage3", "reduced_precision"): "build",
    ("gemm_hg_wmma_padding", "reduced_precision"): "build",
    ("gemm_hg_mma_permuted", "reduced_precision"): "build",
    # a TMA ring into a struct of shared arrays read by wgmma descriptors: no subscript of a __shared__ array
    # to follow in the source; the build shows TMA loads feeding HGMMA
    ("gemm_fc5_warp_specialized_ring", "smem_tiling"): "build",
    ("gemm_fc2_tma_wgmma", "smem_tiling"): "build",
    # int4 stores into a permuted shared layout read by ldmatrix macros: the source's subscripts are a
    # rotation no rule follows; the build shows global loads stored to shared memory feeding LDSM and HMMA
    ("gemm_hg_mma_permuted", "smem_tiling"): "build",
    # uint4 loads through a typedef (data_t): the build's LDG.E.128
    ("histogram_cs64_thread_subhistograms", "vector_loads"): "build",
    # cuda::memcpy_async of an aligned_size_t<16> shape held in a variable: the build's 16-byte LDGSTS
    ("gemm_cs_async_copy_multistage", "vector_loads"): "build",
    # __pipeline_memcpy_async of sizeof(float4): no vector type is loaded in the source; the build's LDGSTS.E.128
    ("gemm_chb_wmma_cp_async_double_buffer", "vector_loads"): "build",
    # `half` buffers converted by casts and operators only ((half)x, float arithmetic on half values): no
    # conversion intrinsic to name; the build converts (F2F / HADD2 / F2FP)
    ("attention_llcu_scores_matvec_kv_cache", "reduced_precision"): "build",
    ("softmax_llcu_scores_row_in_shared", "reduced_precision"): "build",
    # __half tiles moved as int4 and fed to WMMA through a template's type parameter: the build's HMMA on f16
    ("gemm_lm07_wmma_vectorized_double_buffer", "reduced_precision"): "build",
    # half WMMA accumulators and 16-byte cp.async through a macro whose size is an "n" operand: the source
    # names neither (its HALF2 / LDST128BITS macros are never used), the build shows HMMA.F16 and LDGSTS.128
    ("gemm_lcu_hgemm_wmma_dbuf_async", "reduced_precision"): "build",
    ("gemm_lcu_hgemm_wmma_dbuf_async", "vector_loads"): "build",
    # (the retired held-out halves of batches 2-4) half or bf16 values converted or accumulated through casts,
    # operators, CUB or a template's type: no conversion intrinsic in the source; the build's F2F / HADD2 / F2FP
    ("attention_llcu_values_transposed_double_buffer", "reduced_precision"): "build",
    ("elementwise_llcu_convert_fp16_to_fp32", "reduced_precision"): "build",
    ("gemm_lcu_hgemm_wmma_naive", "reduced_precision"): "build",
    ("gemm_llcu_logits_matvec_uint4_no_allocate", "reduced_precision"): "build",
    ("gemm_lm07_wmma_half_skew", "reduced_precision"): "build",
    ("reduce_llcu_argmax_cub_block", "reduced_precision"): "build",
    ("rmsnorm_llcu_single_block_cub", "reduced_precision"): "build",
    ("softmax_llcu_scores_no_smem", "reduced_precision"): "build",
    # tiles stored to shared memory and read by ldmatrix / WMMA loads into HMMA through index arithmetic no
    # source rule follows; the build shows global loads stored to shared memory feeding LDSM and HMMA
    ("gemm_lcu_hgemm_mma_warp4x4", "smem_tiling"): "build",
    ("gemm_lm07_wmma_half_skew", "smem_tiling"): "build",
    # shared atomics into a per-block histogram of several slots (ATOMS), spelled through a helper
    ("histogram_lcp_image_privatized", "privatized_atomics"): "build",
    # 16-byte loads through a vector type the source reaches by a typedef or cast: the build's 128-bit LDG
    ("sort_hb_radix_bottom_scan_scatter", "vector_loads"): "build",
    # SGEMM tiles filled through float4 casts, inline-asm cp.async or ld/st wrappers, register prefetches or
    # pointer offsets and read through pointers into them: spellings no source rule follows; the build's
    # dataflow (ptx/tiles.py's shared_tile) shows global data stored to shared arrays as loaded and read back at
    # other threads' slots
    ("gemm_lcu_sgemm_t8x8_f32x4", "smem_tiling"): "build",
    ("gemm_lm03_1d_thread_tiling", "smem_tiling"): "build",
    ("gemm_yh_ampere_sgemm_cp_async", "smem_tiling"): "build",
    ("gemm_yh_sgemm_128x128_ldg_sts_double_buffer", "smem_tiling"): "build",
    ("gemm_yz10_register_prefetch", "smem_tiling"): "build",
    ("gemm_yz11_smem_double_buffer", "smem_tiling"): "build",
    # the same for a values tile stored transposed, a convolution's tile with its halo, transposes through a
    # swizzled or six-dimensional index, and a normalized row (x * weight) every warp's lanes read
    ("attention_llcu_values_transposed_double_buffer", "smem_tiling"): "build",
    ("stencil_lcp_conv2d_tiled_constant", "smem_tiling"): "build",
    ("transpose_hb_tensor6d_tile", "smem_tiling"): "build",
    ("transpose_lcu_smem_swizzle", "smem_tiling"): "build",
    ("rmsnorm_calm_output_gemv_fused", "smem_tiling"): "build",
    # thread tiles whose fragments are loaded by inline asm or float4 members and accumulated through spellings
    # no source rule follows: the build (ptx/tiles.py's register_tile) shows four or more loop-carried FMA
    # accumulators, each loaded value feeding several
    ("gemm_lm03_1d_thread_tiling", "register_blocking"): "build",
    ("gemm_lx_sgemm_register_prefetch_double_buffer", "register_blocking"): "build",
    ("gemm_yh_ampere_sgemm_cp_async", "register_blocking"): "build",
    ("gemm_yh_sgemm_128x128_ldg_sts_double_buffer", "register_blocking"): "build",
    # the build overrules the source where there is one (docs/features.md): a float4 cast of a shared address
    # or an inline-PTX spelling with no 128-bit global access in the build; half named only in a branch the
    # build never takes
    ("gemm_yh_ampere_sgemm_cp_async", "vector_loads"): "source",
    ("gemm_yh_sgemm_128x128_ldg_sts_double_buffer", "vector_loads"): "source",
    ("rmsnorm_gg_block_reduce_pdl", "reduced_precision"): "source",
    ("scan_gg_cumsum_warp_shfl_carry", "reduced_precision"): "source",
    # batch 5's tune half, first seen after the dataflow facts were written: tiles the source rules do not
    # follow (PTX helpers, swizzle functions, tiles read by ldmatrix or WMMA, a row-wavefront stencil) that the
    # PTX shows as global data stored to shared memory and read at other threads' slots
    ("gemm_awq_w4a16_m128n64k32", "smem_tiling"): "build",
    ("gemm_mmt_v00_wmma_tiles", "smem_tiling"): "build",
    ("gemm_swz_multi_pattern_swizzle", "smem_tiling"): "build",
    ("gemm_swz_wmma_16x16", "smem_tiling"): "build",
    ("gemm_tpo_mmult11_smem_pingpong", "smem_tiling"): "build",
    ("gemm_tpo_mmult9_outer_product_8x8", "smem_tiling"): "build",
    ("stencil_rod_pathfinder", "smem_tiling"): "build",
    # cp.async rings waited with `wait_group N`, N > 0, through helpers (the PTX's wait) and their 16-byte copies
    ("gemm_mmt_v07_mma_ldmatrix_pipeline", "double_buffering"): "build",
    ("gemm_mmt_v13_swizzled_pipeline", "double_buffering"): "build",
    ("gemm_mmt_v07_mma_ldmatrix_pipeline", "vector_loads"): "build",
    ("gemm_mmt_v13_swizzled_pipeline", "vector_loads"): "build",
    # half values converted or computed through operators and typedefs (the build's F2F / HADD2 / F2FP)
    ("elementwise_awq_gelu_quant", "reduced_precision"): "build",
    ("gemm_mmt_v00_wmma_tiles", "reduced_precision"): "build",
    ("gemm_mmt_v07_mma_ldmatrix_pipeline", "reduced_precision"): "build",
    ("gemm_mmt_v13_swizzled_pipeline", "reduced_precision"): "build",
    ("gemm_swz_wmma_16x16", "reduced_precision"): "build",
    # lanes on consecutive elements through an index the source rules do not parse (8 halves per lane at
    # `8 * tx` through a 128-bit helper; `threadIdx.x + i * 32` in a warp per row): the PTX's addresses
    # (ptx/coalescing.py's coalesced) show it
    ("gemm_swz_wmma_16x16", "coalesced_access"): "build",
    ("softmax_norm_ds_softmax_backward_warp", "coalesced_access"): "build",
    # batch 6's tune half, first seen after the facts were written: a register-prefetched 8x8 SGEMM and a
    # weight-gradient stencil whose tiles and register tile the source rules miss
    ("gemm_sy_128x128x8_register_prefetch", "register_blocking"): "build",
    ("gemm_sy_128x128x8_register_prefetch", "smem_tiling"): "build",
    ("stencil_fs_lightconv_grad_weights_short", "smem_tiling"): "build",
    # a false positive of register_tile: the P x V loop writes several outputs per thread into a shared array;
    # unrolled, the compiler keeps them in registers with each loaded P value feeding several of them (the label
    # follows the source: a shared accumulator is not a per-thread register array)
    ("attention_tfa_flash_v1", "register_blocking"): "build",
    # scores through exp into the product with V in one kernel, every step through a shared array (the scores,
    # the exponentials) and no MMA call to name: the build's dataflow (ptx/fusion.py's fused, form d) follows
    # the unrolled FMA chain through ex2 into the second chain
    ("attention_tfa_flash_v1", "kernel_fusion"): "build",
    # the running maximum and denominator kept in global memory and copied to shared arrays each step, rescaled
    # by exp(old max - new max) and stored back: no source rule follows the state through memory; the build's
    # dataflow (ptx/fusion.py's online_rescale) does
    ("attention_tfa_flash_v1", "online_softmax"): "build",
    ("attention_tfa_flash_v2", "kernel_fusion"): "build",
    ("attention_tfa_flash_v2", "online_softmax"): "build",
    # (batches 5 and 6 whole since their held-out halves were retired, and batch 7's tune half) a build's facts
    # where the source's spellings fall short: tiles filled by cp.async helpers, inline PTX, swizzle functions,
    # ldmatrix / WMMA reads, pointer offsets (shared_tile); pipelines waited through helpers (shared_stages);
    # register tiles through float4 members (register_tile); lanes on consecutive elements through indexes no
    # source rule parses (coalesced); half conversions through operators (F2F / HADD2 / F2FP); 16-byte copies
    # through typedefs and cp.async sizes (LDG.128 / LDGSTS.128); CUB's shuffles (SHFL.UP / DOWN)
    ("gemm_exl2_h_gemm_tall", "coalesced_access"): "build",
    ("gemm_magma_sgemm_nn", "smem_tiling"): "build",
    ("gemm_mmt_v02_wmma_cp_async_4stage", "double_buffering"): "build",
    ("gemm_mmt_v02_wmma_cp_async_4stage", "reduced_precision"): "build",
    ("gemm_mmt_v02_wmma_cp_async_4stage", "smem_tiling"): "build",
    ("gemm_mmt_v02_wmma_cp_async_4stage", "vector_loads"): "build",
    ("gemm_mmt_v09_swizzled_wordfrag_pipeline", "coalesced_access"): "build",
    ("gemm_mmt_v09_swizzled_wordfrag_pipeline", "double_buffering"): "build",
    ("gemm_mmt_v09_swizzled_wordfrag_pipeline", "reduced_precision"): "build",
    ("gemm_mmt_v09_swizzled_wordfrag_pipeline", "smem_tiling"): "build",
    ("gemm_mmt_v09_swizzled_wordfrag_pipeline", "vector_loads"): "build",
    ("gemm_swz_ptx_mma_ldmatrix", "coalesced_access"): "build",
    ("gemm_swz_ptx_mma_ldmatrix", "smem_tiling"): "build",
    ("gemm_swz_x4_xor_swizzle", "coalesced_access"): "build",
    ("gemm_swz_x4_xor_swizzle", "smem_tiling"): "build",
    ("gemm_sy_128x256x8_cp_async", "register_blocking"): "build",
    ("gemm_sy_128x256x8_cp_async", "smem_tiling"): "build",
    ("gemm_tpo_mmult12_register_pingpong", "smem_tiling"): "build",
    ("reduction_cub_block_reduce_example", "coalesced_access"): "build",
    ("scan_kl_cmvn_stats", "warp_shuffle"): "build",
    ("scan_shoc_bottom_scan_float4", "vector_loads"): "build",
    ("sort_cub_block_radix_sort_example", "coalesced_access"): "build",
    ("stencil_mmcv_carafe_forward", "smem_tiling"): "build",
    ("stencil_rod_hotspot", "smem_tiling"): "build",
    ("transpose_magma_ztranspose", "coalesced_access"): "build",
    # block reductions the source rules do not follow (a tree over a pointer into shared memory, a tree in a
    # grid-stride reduction): ptx/reduction.py's shared_reduction
    ("reduction_pz_sum_values", "block_reduction_tree"): "build",
    ("reduction_rod_backprop_layerforward", "block_reduction_tree"): "build",
    # padded tiles (a pitch of BLK + 1 through macros and inline PTX): ptx/layout_loops.py's shared_padding with a
    # tile; and a grid-stride loop whose stride is held in a variable of another name
    ("gemm_magma_sgemm_nn", "bank_conflict_padding"): "build",
    ("gemm_tpo_mmult11_smem_pingpong", "bank_conflict_padding"): "build",
    ("gemm_tpo_mmult12_register_pingpong", "bank_conflict_padding"): "build",
    ("reduction_pz_sum_values", "grid_stride_loop"): "build",
    # statistics and output in one kernel where the reduction is a helper the source rules do not name: the
    # build's fused (form a)
    ("softmax_norm_exl2_head_norm", "kernel_fusion"): "build",
    ("softmax_norm_kl_diff_normalize_per_row", "kernel_fusion"): "build",
    # the build overrules the source where there is one, rightly: a restrict pointer written through an alias
    # (`int4* b4 = (int4*) buffer`, `half2* x2 = (half2*)(x + i)`: plain loads, or none, and no .CONSTANT); a
    # reduction and an output loop the definition leaves out of fusion (a LayerNorm backward's per-column partial
    # sums, trace partials finished by atomics); a block-level loop `r += gridDim.x` spelled like a stride of
    # threads; a half2 cast of a shared address (no 128-bit global access)
    ("elementwise_exl2_h_softcap", "readonly_cache"): "source",
    ("elementwise_omm_clear_buffer", "readonly_cache"): "source",
    ("reduction_ds_layernorm_backward1", "kernel_fusion"): "source",
    # ... and a row held across a reduction only where the build sees the statistic in an output (fused): the
    # same LayerNorm backward's column partials are no single-pass row
    ("reduction_ds_layernorm_backward1", "single_pass_row"): "source",
    ("reduction_kl_trace_mat_mat", "kernel_fusion"): "source",
    ("reduction_kl_trace_mat_mat_trans", "kernel_fusion"): "source",
    ("reduction_mmcv_chamfer_distance", "grid_stride_loop"): "source",
    ("reduction_ls_dropout_bias_bwd_half2", "vector_loads"): "source",
    # ... and wrongly: a fused RMS norm + GEMV whose stored value is one reduction scaled by another, with no
    # input element in it (fused's form a wants one); the source rule found it
    ("rmsnorm_calm_output_gemv_fused", "kernel_fusion"): "source",
    # label questions where the build sees what the labels leave out: column sums of partials transposed through
    # a shared tile and finished by shuffles (labelled a tile, not a block reduction, like batch 5's DeepSpeed
    # column sum), CUB's radix sort shuffling inside its block scan, a complex-double transpose's 16-byte
    # elements; and one false positive of the padded-tile rule: Needleman-Wunsch's [B + 1][B + 1] wavefront
    # array, whose extra row and column are the recurrence's boundary, not a padding
    ("reduction_ls_dropout_act_bias_bwd", "block_reduction_tree"): "build",
    ("reduction_ls_dropout_bias_bwd_half2", "block_reduction_tree"): "build",
    ("sort_cub_block_radix_sort_example", "warp_shuffle"): "build",
    ("transpose_magma_ztranspose", "vector_loads"): "build",
    ("stencil_rod_needle", "bank_conflict_padding"): "build",
}


def test_build_and_source_disagree_on_the_tuning_data_only_where_said(public):
    seen = {}
    for k in public["tune"]:
        src, both = detect_kernel(k, CATALOGUE, builds=False), detect_kernel(k, CATALOGUE)
        for f in src ^ both:
            seen[(k.name, f)] = "build" if f in both else "source"
    assert seen == TUNE_BUILD_DISAGREES


@pytest.mark.parametrize("batches", sorted(HELD_OUT_READINGS))
def test_the_held_out_readings_do_not_regress(public, batches):
    """Scored as it comes (never tuned on): the heldout halves of these batches at or above their reading."""
    kernels = [k for k in public["heldout"] if public["batch"][k.name] in batches]
    if not kernels:
        pytest.skip(f"no held-out kernels of batches {batches} written here")
    t = totals(score(kernels, CATALOGUE))
    floor = HELD_OUT_READINGS[batches]
    assert round(t.precision, 2) >= floor[0] and round(t.recall, 2) >= floor[1], t
