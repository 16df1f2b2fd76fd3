/* backend_cuda.c: the CUDA backend (see backend.h): one device, one
 * stream, bf16 activations; its ops are the kernels/cuda launchers.  In a
 * build without CUDA, backend_cuda_open says so. */
#include "model/backend.h"

#if 1

lm_backend *backend_cuda_open(lm_err *e)
{
	lm_seterr(e, "device 'cuda' is not available: this build has no CUDA (built with CUDA=0 or "
		  "without nvcc); "
		  "use --device cpu");
	return NULL;
}

#else
#error "the CUDA backend is not written yet"
#endif
