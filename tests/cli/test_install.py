#!/usr/bin/python3
"""cmake --install into a temporary prefix, then use what it installed as a user would:

  files      bin/vidfeat, libvidfeat.so (with its version links) and libvidfeat.a, vidfeat.h,
             the CUDA backend's module (lib/vidfeat/libvidfeat-cuda.so, its one entry exported)
             in a build that has it,
             lib/pkgconfig/vidfeat.pc, lib/cmake/vidfeat (package config and version), the model
             manifests under share/vidfeat/models, the man page
  symbols    the shared library exports only the public API (vf_*)
  paths      no installed file (command, libraries, module, Python package) holds a path of the
             source or build tree
  pkg-config samples/example.c built with `cc $(pkg-config --cflags --libs vidfeat)` against the
             shared library, and with vidfeat-static.pc against libvidfeat.a; both run on a clip with the
             tiny CNN and print the same frames
  CMake      a project with find_package(vidfeat) linking vidfeat::vidfeat builds and runs the
             same example
  command    the installed vidfeat runs (--version) and its man page is a man page; it looks
             for models in ./models and its installation, not in the clone it was built from

usage: test_install.py VIDFEAT BUILD_DIR SOURCE_DIR
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

from vfcheck import SKIP, check


def sh(*args, env=None, cwd=None):
    r = subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=600)
    check(r.returncode == 0, "%s: exit %d\n%s%s" % (" ".join(args), r.returncode, r.stdout[-2000:],
                                                    r.stderr[-2000:]))
    return r.stdout


def main():
    exe, build, src = sys.argv[1:4]
    for tool in ("cc", "pkg-config", "cmake"):
        if not shutil.which(tool):
            print("skip: no %s" % tool)
            return SKIP
    model = os.path.join(src, "models", "tiny_cnn.onnx")
    clip = os.path.join(src, "samples", "testsrc_64x48.mp4")
    if not (os.path.exists(model) and os.path.exists(clip)):
        print("skip: the build made no tiny model or sample clip (no python3/ffmpeg)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="vidfeat_install_")
    try:
        prefix = os.path.join(tmp, "prefix")
        sh("cmake", "--install", build, "--prefix", prefix)
        libdir = os.path.dirname(glob.glob(os.path.join(prefix, "lib*", "**", "libvidfeat.a"),
                                           recursive=True)[0])
        want = ["bin/vidfeat", "include/vidfeat.h", "share/man/man1/vidfeat.1",
                "share/vidfeat/models/inception_v3.json", "share/vidfeat/models/vgg19.json"]
        for rel in want:
            check(os.path.isfile(os.path.join(prefix, rel)), "not installed: %s" % rel)
        for name in ("libvidfeat.so", "libvidfeat.a", "pkgconfig/vidfeat.pc", "pkgconfig/vidfeat-static.pc",
                     "cmake/vidfeat/vidfeatConfig.cmake", "cmake/vidfeat/vidfeatConfigVersion.cmake"):
            check(os.path.exists(os.path.join(libdir, name)), "not installed: %s" % name)
        if "cuda: yes" in sh(exe, "--version"):  # the CUDA backend's run-time module
            module = os.path.join(libdir, "vidfeat", "libvidfeat-cuda.so")
            check(os.path.isfile(module), "not installed: the CUDA module")
            mod_exports = [l.split()[-1] for l in sh("nm", "-D", "--defined-only",
                                                    module).splitlines() if l.strip()]
            check(mod_exports == ["vfi_backend_module"], "the module exports %s" % mod_exports)
        so = os.path.realpath(os.path.join(libdir, "libvidfeat.so"))
        check(re.search(r"libvidfeat\.so\.\d+\.\d+\.\d+$", so), "no versioned library: %s" % so)
        exported = [l.split()[-1] for l in sh("nm", "-D", "--defined-only", so).splitlines()
                    if l.strip()]
        check(exported and all(s.startswith("vf_") for s in exported),
              "exported beyond the API: %s" % [s for s in exported if not s.startswith("vf_")][:8])
        print("ok installed: %d files; libvidfeat.so exports %d vf_ symbols and nothing else"
              % (sum(len(f) for _, _, f in os.walk(prefix)), len(exported)))
        # no installed file names the source or build tree (a moved or packaged installation
        # would point at a directory that is gone): not the libraries' lookups, not the
        # debug information's file names, not a run path
        trees = {os.fsencode(t) for t in (src, build, os.path.realpath(src), os.path.realpath(build))}
        leaks = []
        for d, _, names in os.walk(prefix):
            for n in names:
                path = os.path.join(d, n)
                if os.path.islink(path):
                    continue
                with open(path, "rb") as f:
                    data = f.read()
                leaks += [(os.path.relpath(path, prefix), t.decode()) for t in trees if t in data]
        check(not leaks, "installed files name the build or source tree: %s" % leaks[:10])
        print("ok no installed file names the source or build tree")

        env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
        example = os.path.join(src, "samples", "example.c")
        cflags = sh("pkg-config", "--cflags", "vidfeat", env=env).split()
        libs = sh("pkg-config", "--libs", "vidfeat", env=env).split()
        static_libs = sh("pkg-config", "--libs", "vidfeat-static", env=env).split()
        shared_bin, static_bin = os.path.join(tmp, "ex_shared"), os.path.join(tmp, "ex_static")
        sh("cc", "-o", shared_bin, example, *cflags, *libs, env=env)
        sh("cc", "-o", static_bin, example, *cflags, *static_libs, env=env)
        run_env = dict(os.environ, LD_LIBRARY_PATH=libdir)
        ldd = sh("ldd", shared_bin, env=run_env)
        check(os.path.realpath(libdir) in ldd or libdir in ldd,
              "the example does not use the installed library:\n%s" % ldd)
        check("libvidfeat" not in sh("ldd", static_bin), "the static example needs libvidfeat.so")
        out = [sh(b, model, clip, env=run_env) for b in (shared_bin, static_bin)]
        frames = [l for l in out[0].splitlines() if " t=" in l]
        check(len(frames) >= 3 and out[0] == out[1], "the examples print:\n%s\n%s" % tuple(out))
        print("ok pkg-config: samples/example.c built against libvidfeat.so and libvidfeat.a, "
              "both print the same %d frames" % len(frames))

        proj = os.path.join(tmp, "proj")
        os.mkdir(proj)
        shutil.copy(example, proj)
        with open(os.path.join(proj, "CMakeLists.txt"), "w") as f:
            f.write("cmake_minimum_required(VERSION 3.22)\nproject(uses_vidfeat C)\n"
                    "find_package(vidfeat 0.1 REQUIRED)\n"
                    "add_executable(example example.c)\n"
                    "target_link_libraries(example PRIVATE vidfeat::vidfeat)\n"
                    "if(NOT TARGET vidfeat::vidfeat_static)\n"
                    "  message(FATAL_ERROR \"no vidfeat::vidfeat_static\")\nendif()\n")
        pbuild = os.path.join(proj, "build")
        sh("cmake", "-S", proj, "-B", pbuild, "-DCMAKE_PREFIX_PATH=" + prefix)
        sh("cmake", "--build", pbuild)
        got = sh(os.path.join(pbuild, "example"), model, clip, env=run_env)
        check(got == out[0], "find_package's example prints otherwise:\n%s" % got)
        print("ok CMake: find_package(vidfeat) gives vidfeat::vidfeat (and vidfeat_static); "
              "the example built with it prints the same frames")

        version = sh(os.path.join(prefix, "bin", "vidfeat"), "--version")
        check(version.startswith("vidfeat "), "installed vidfeat --version: %r" % version)
        page = open(os.path.join(prefix, "share", "man", "man1", "vidfeat.1")).read()
        check(page.startswith(".TH VIDFEAT 1") and ".SH EXIT STATUS" in page and "export" in page,
              "the man page")
        if shutil.which("groff"):
            r = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-P-cbou",
                                os.path.join(prefix, "share", "man", "man1", "vidfeat.1")],
                               capture_output=True, text=True)
            check(r.returncode == 0 and "EXIT STATUS" in r.stdout and not r.stderr,
                  "groff renders the man page with: %r" % r.stderr[:500])
        print("ok the installed command runs; the man page has its sections")

        # the installed command looks for models in its installation, never in this clone
        env = {k: v for k, v in os.environ.items() if k != "VIDFEAT_MODELS"}
        r = subprocess.run([os.path.join(prefix, "bin", "vidfeat"), "models", "-v"],
                           capture_output=True, text=True, cwd=tmp, env=env, timeout=60)
        said = [x for x in r.stderr.splitlines() if "looked for in" in x]
        dirs = said[0].split("looked for in ", 1)[1].rsplit(" (", 1)[0].split(":") if said else []
        inside = [d for d in dirs if os.path.isabs(d) for tree in (src, build)
                  if os.path.realpath(d).startswith(os.path.realpath(tree) + os.sep)]
        check(r.returncode == 0 and dirs and not inside and
              os.path.join(prefix, "share", "vidfeat", "models") in dirs,
              "the installed command looks in %s" % dirs)
        print("ok the installed command looks for models in %s" % ", ".join(dirs))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
