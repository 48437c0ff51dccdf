/* pmpp_assert.h: device-side assert for pmpp's CPU engine. Deliberately without an include
 * guard: <assert.h> redefines assert every time it is included, so the shim assert.h includes
 * this again afterwards. A failed assert stops the launch and raises KernelCrashError. */
#undef assert
#ifdef NDEBUG
#define assert(e) ((void)0)
#else
#define assert(e) \
    (static_cast<bool>(e) ? (void)0 : pmpp_device_assert(#e, __FILE__, __LINE__, __func__))
#endif
