// FMA(a, b, c): a fused multiply-add. The driver's fma() where it is fused; in the exact
// variants (MINFER_EXACT, for devices such as lavapipe whose fma() is a product and a sum) a*b
// taken exactly in double, the sum rounded to double, then to float: the fused result except
// where the exact sum lies within 2^-53 of a float midpoint.
#ifdef MINFER_EXACT
#extension GL_ARB_gpu_shader_fp64 : enable
float FMA(float a, float b, float c) { return float(double(a) * double(b) + double(c)); }
#else
float FMA(float a, float b, float c) { return fma(a, b, c); }
#endif
