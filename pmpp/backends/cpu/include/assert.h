/* assert.h shim for pmpp's CPU engine: the C library's header, then the device-side assert. */
#include_next <assert.h>
#include "pmpp_assert.h"
