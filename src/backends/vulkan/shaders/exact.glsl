// FMA(a, b, c): a fused multiply-add; EXP(x): e^x for the CPU's libm expf. The driver's fma() where it is fused; in the exact
// variants (MINFER_EXACT, for devices such as lavapipe whose fma() is a product and a sum) a*b
// taken exactly in double, the sum rounded to double, then to float: the fused result except
// where the exact sum lies within 2^-53 of a float midpoint.
// EXP in the exact variants: e^x in double (x = k ln 2 + r, |r| <= ln 2 / 2, Taylor to r^13:
// error ~2e-16), rounded to float: the correctly rounded result but for exact sums within
// 2^-29 of a float midpoint. libm's expf (glibc: within 0.502 ulp) returns it for all but
// ~0.07% of arguments (measured on 200000 in [-30, 0]); the driver's exp is a few ulp off.
#ifdef MINFER_EXACT
#extension GL_ARB_gpu_shader_fp64 : enable
float FMA(float a, float b, float c) { return float(double(a) * double(b) + double(c)); }
// e^x in double for |x| <= ~104.
double exp_d(double x) {
  const double k = floor(x * 1.4426950408889634LF + 0.5LF);
  const double r = (x - k * 6.93147180369123816490e-01LF) - k * 1.90821492927058770002e-10LF;
  double p = 1.0LF / 6227020800.0LF;  // 1 / 13!
  p = p * r + 1.0LF / 479001600.0LF;
  p = p * r + 1.0LF / 39916800.0LF;
  p = p * r + 1.0LF / 3628800.0LF;
  p = p * r + 1.0LF / 362880.0LF;
  p = p * r + 1.0LF / 40320.0LF;
  p = p * r + 1.0LF / 5040.0LF;
  p = p * r + 1.0LF / 720.0LF;
  p = p * r + 1.0LF / 120.0LF;
  p = p * r + 1.0LF / 24.0LF;
  p = p * r + 1.0LF / 6.0LF;
  p = p * r + 0.5LF;
  p = p * r + 1.0LF;
  p = p * r + 1.0LF;
  return ldexp(p, int(k));
}
float EXP(float xf) {
  if (isnan(xf)) return xf;
  if (xf > 89.0) return 1.0 / 0.0;
  if (xf < -104.0) return 0.0;
  return float(exp_d(double(xf)));
}
// tanh in double, rounded to float (libm's tanhf the same way: the soft-cap's scores): for
// |x| < 0.5 its odd series to x^25, else (e^2x - 1) / (e^2x + 1); 1 past |x| = 10.
float TANH(float xf) {
  if (isnan(xf)) return xf;
  if (abs(xf) >= 10.0) return xf > 0.0 ? 1.0 : -1.0;
  const double x = double(xf);
  if (abs(x) < 0.5LF) {
    const double x2 = x * x;
    // tanh x = x (1 - x^2/3 + 2x^4/15 - 17x^6/315 + 62x^8/2835 - ...): Taylor coefficients
    const double c[12] = double[12](-1.0LF / 3.0LF, 2.0LF / 15.0LF, -17.0LF / 315.0LF, 62.0LF / 2835.0LF,
                                    -1382.0LF / 155925.0LF, 21844.0LF / 6081075.0LF, -929569.0LF / 638512875.0LF,
                                    6404582.0LF / 10854718875.0LF, -443861162.0LF / 1856156927625.0LF,
                                    18888466084.0LF / 194896477400625.0LF, -113927491862.0LF / 2900518163668125.0LF,
                                    58870668456604.0LF / 3698160658676859375.0LF);
    double s = c[11];
    for (int i = 10; i >= 0; --i) s = s * x2 + c[i];
    return float(x + x * x2 * s);
  }
  const double e2 = exp_d(2.0LF * x);
  return float((e2 - 1.0LF) / (e2 + 1.0LF));
}
#else
float FMA(float a, float b, float c) { return fma(a, b, c); }
float EXP(float x) { return exp(x); }
float TANH(float x) { return tanh(x); }
#endif

// e^x as cpu/kernels.cpp exp_poly: n = round(x / ln 2) by the shift trick, r = x - n ln 2 in two
// parts, a degree-5 polynomial in Estrin's form, times 2^n.
float exp_poly(float x) {
  const float kShift = uintBitsToFloat(0x4b400000u), kInvLn2 = uintBitsToFloat(0x3fb8aa3bu);
  const float kLn2Hi = uintBitsToFloat(0x3f317200u), kLn2Lo = uintBitsToFloat(0x35bfbe8eu);
  const float kC0 = uintBitsToFloat(0x3c072010u), kC1 = uintBitsToFloat(0x3d2b9f17u);
  const float kC2 = uintBitsToFloat(0x3e2aaf33u), kC3 = uintBitsToFloat(0x3efffedbu);
  const float kC4 = uintBitsToFloat(0x3f7ffff6u);
  precise float z = FMA(x, kInvLn2, kShift);
  precise float n = z - kShift;
  precise float r = FMA(-n, kLn2Lo, FMA(-n, kLn2Hi, x));
  precise float u = r * r;
  precise float q = FMA(FMA(FMA(kC0, r, kC1), u, FMA(kC2, r, kC3)), u, FMA(kC4, r, 1.0));
  if (isnan(n)) return q;
  if (abs(n) > 192.0) return n <= 0.0 ? 0.0 : 1.0 / 0.0;
  return ldexp(q, int(n));
}

