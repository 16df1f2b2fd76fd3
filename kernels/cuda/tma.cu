// tma.cu: host side of tma.cuh: tensor maps for the bulk tensor copy
// engine.  The driver's encoder is looked up through the runtime (no link
// against libcuda), once.
#include "tma.cuh"

#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encoder(void)
{
	static PFN_cuTensorMapEncodeTiled_v12000 fn;
	static bool tried;
	if (!tried) {
		void *p = nullptr;
		cudaDriverEntryPointQueryResult q;
		if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
						     cudaEnableDefault, &q) == cudaSuccess &&
		    q == cudaDriverEntryPointSuccess)
			fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
		tried = true;
	}
	return fn;
}

}  // namespace

// A 3-d map of base's [dims[2]][dims[1]][dims[0]] elements of type ty, its
// dimensions 1 and 2 strides[0..1] bytes apart, read in boxes of box[0..2]
// elements, swizzled as sw: 0 on success, -1 if the driver refuses.
static int encode3(CUtensorMap *map, CUtensorMapDataType ty, const void *base,
		   const cuuint64_t dims[3], const cuuint64_t strides[2], const cuuint32_t box[3],
		   CUtensorMapSwizzle sw)
{
	PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
	if (!fn)
		return -1;
	cuuint32_t estride[3] = {1, 1, 1};
	CUresult r = fn(map, ty, 3, const_cast<void *>(base), dims, strides, box, estride,
			CU_TENSOR_MAP_INTERLEAVE_NONE, sw, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return r == CUDA_SUCCESS ? 0 : -1;
}

int tma_map_3d(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t n2,
	       uint32_t rows)
{
	const int esz = 2;  // bf16
	const cuuint64_t dims[3] = {n0, n1, n2};
	const cuuint64_t strides[2] = {n0 * esz, n0 * n1 * esz};  // bytes, dims 1 and 2
	const cuuint32_t box[3] = {128 / esz, rows, 1};
	return encode3(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims, strides, box,
		       CU_TENSOR_MAP_SWIZZLE_128B);
}

// [n1][n0] bf16, rows ld apart, in boxes of width x rows, swizzled in
// the mode whose span is a box row (width 64: 128 bytes, 32: 64 bytes).
static int map_rows(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t ld,
		    uint32_t width, uint32_t rows)
{
	const int esz = 2;  // bf16
	const cuuint64_t dims[3] = {n0, n1, 1};
	const cuuint64_t strides[2] = {ld * esz, ld * n1 * esz};  // bytes, dims 1 and 2
	const cuuint32_t box[3] = {width, rows, 1};
	return encode3(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, base, dims, strides, box,
		       width * esz == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B);
}

int tma_map_rows(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t ld,
		 uint32_t rows)
{
	return map_rows(map, base, n0, n1, ld, 64, rows);
}

int tma_map_rows32(CUtensorMap *map, const void *base, uint64_t n0, uint64_t n1, uint64_t ld,
		   uint32_t rows)
{
	return map_rows(map, base, n0, n1, ld, 32, rows);
}

int tma_map_4d(CUtensorMap *map, const void *base, const uint64_t n[4], const uint64_t stride[3],
	       uint32_t rows)
{
	const int esz = 2;  // bf16
	PFN_cuTensorMapEncodeTiled_v12000 fn = encoder();
	if (!fn)
		return -1;
	cuuint64_t dims[4] = {n[0], n[1], n[2], n[3]};
	cuuint64_t strides[3] = {stride[0] * esz, stride[1] * esz, stride[2] * esz};  // bytes
	cuuint32_t box[4] = {128 / esz, 1, rows, 1};
	cuuint32_t estride[4] = {1, 1, 1, 1};
	CUresult r = fn(map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void *>(base), dims,
			strides, box, estride, CU_TENSOR_MAP_INTERLEAVE_NONE,
			CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
			CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
	return r == CUDA_SUCCESS ? 0 : -1;
}

int tma_map_f32_rows(CUtensorMap *map, const float *base, uint64_t n0, uint64_t n1,
		     uint32_t width)
{
	const cuuint64_t dims[3] = {n0, n1, 1};
	const cuuint64_t strides[2] = {n0 * sizeof(float), n0 * n1 * sizeof(float)};  // bytes
	const cuuint32_t box[3] = {width, 1, 1};
	return encode3(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, base, dims, strides, box,
		       CU_TENSOR_MAP_SWIZZLE_NONE);
}
