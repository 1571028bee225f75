# Cross build for 64-bit ARM Linux with Debian's cross toolchain (g++-aarch64-linux-gnu), used
# by the `arm64` preset (CMakePresets.json); the binaries run here under qemu-user:
#
#   cmake --preset arm64 && cmake --build build-arm64
#   qemu-aarch64 -L /usr/aarch64-linux-gnu -cpu max build-arm64/bin/minfer MODEL "..."
#
# Libraries: libc and libstdc++ are linked from the cross sysroot (/usr/aarch64-linux-gnu); the
# others (fmt, libcurl + OpenSSL, libedit, cpp-httplib, gtest) are Debian's arm64 multiarch
# packages (`dpkg --add-architecture arm64`, `apt-get install libcurl4-openssl-dev:arm64 ...`,
# scripts/setup.sh), which install beside the amd64 ones in /usr/lib/aarch64-linux-gnu with
# headers shared in /usr/include. Found through CMAKE_LIBRARY_ARCHITECTURE (CMake derives
# aarch64-linux-gnu from the compiler) and pkg-config pointed at the arm64 .pc files below.
# The multiarch packages bring Debian's arm64 glibc (libc6:arm64) to /lib/aarch64-linux-gnu,
# a newer build of 2.36 than the cross sysroot's. Under `qemu-aarch64 -L /usr/aarch64-linux-gnu`
# the default interpreter /lib/ld-linux-aarch64.so.1 is the sysroot's, which then finds the
# multiarch libc.so.6 first (qemu falls back to the host's paths, and the multiarch directory
# leads the loader's search): two glibc builds in one process, and the first pthread_create
# hangs. So the binaries name the multiarch loader, /lib/aarch64-linux-gnu/ld-linux-aarch64.so.1
# (the path Debian and Ubuntu arm64 systems have; absent from the sysroot, so qemu -L falls
# back to the host's), and every library at run time is Debian's arm64 build, one glibc:
# `qemu-aarch64 [-L /usr/aarch64-linux-gnu] build-arm64/bin/minfer` runs as it is. Nothing is
# linked statically: Debian ships no static libcurl dependencies (krb5, ldap) and no static fmt.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,--dynamic-linker=/lib/aarch64-linux-gnu/ld-linux-aarch64.so.1")

# Search the cross sysroot and the multiarch tree for libraries and headers, the host for
# programs (python3, pkg-config, glslc).
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config (cpp-httplib) reads only the arm64 .pc files.
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# Tests (ctest, and gtest's test discovery at build time) run the binaries under qemu-user with
# every feature the ARM tables use (-cpu max: NEON, dotprod, i8mm). The preset sets the same.
if(NOT CMAKE_CROSSCOMPILING_EMULATOR)
  set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu;-cpu;max)
endif()
