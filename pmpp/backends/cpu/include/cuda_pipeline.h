// cuda_pipeline.h shim for pmpp's CPU engine: the primitives interface only (cuda::pipeline of
// libcu++ is not supported).
#include "cuda_pipeline_primitives.h"
