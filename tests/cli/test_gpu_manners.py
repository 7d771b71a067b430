#!/usr/bin/python3
"""What the command says about the GPU on a machine where it cannot be used (this one has no
NVIDIA driver; a machine with one skips the cases that need its absence):

  precision     --precision f16 or tf32 without --gpu (also in a bench list): exit 2, one line
                saying they run on the GPU, nothing written
  no CUDA link  (a build with the CUDA backend) ldd vidfeat and the NEEDED entries of
                libvidfeat.so name no CUDA library: the backend is a run-time module
  no driver     --gpu without libcuda.so.1: exit 3, one line "no NVIDIA driver found", nothing
                written; --backend auto extracts on the CPU
  bad driver    a libcuda.so.1 that is not a driver (made here with cc): the runtime's
                "insufficient driver" is told as "no NVIDIA driver found (... does not work)"
  no module     VIDFEAT_MODULE_DIR naming a directory without the module, one with a file that
                is not a library, one with a module of another vidfeat (made here with cc):
                --gpu exits 3 with one line naming the file and why; auto runs on the CPU
  not built     (a build without it) --gpu: exit 3, "this build has no CUDA backend"

usage: test_gpu_manners.py VIDFEAT MODELS_DIR SAMPLES_DIR [LIBVIDFEAT_SO]
"""
import os
import shutil
import subprocess
import sys
import tempfile

from vfcheck import check, nvidia_driver_loads

CUDA_LIBS = ("libcuda.so", "libcudart", "libcublas", "libcudnn")


def run(exe, *args, env=None):
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=120,
                          env=env)


def one_line(r, code, what):
    lines = r.stderr.strip().splitlines()
    check(r.returncode == code and len(lines) == 1 and lines[0].startswith("vidfeat: "),
          "%s: exit %d (want %d), %r" % (what, r.returncode, code, r.stderr))
    return lines[0]


def cc(tmp, name, source, out):
    """Build a shared library from source with the C compiler; False when there is none."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if not compiler:
        return False
    src = os.path.join(tmp, name + ".c")
    with open(src, "w") as f:
        f.write(source)
    subprocess.run([compiler, "-shared", "-fPIC", "-o", out, src], check=True)
    return True


def main():
    exe, models, samples = sys.argv[1:4]
    lib = sys.argv[4] if len(sys.argv) > 4 else None
    model = os.path.join(models, "tiny_cnn.onnx")
    clip = os.path.join(samples, "testsrc_64x48.mp4")
    tmp = tempfile.mkdtemp(prefix="vidfeat_gpu_")
    try:
        db = os.path.join(tmp, "x.db")

        def extract(*args, env=None):
            return run(exe, "-q", "--model", model, "-o", db, *args, clip, env=env)

        for args in (["--precision", "f16"], ["--precision", "tf32", "--backend", "cpu"]):
            line = one_line(extract(*args), 2, " ".join(args))
            check("runs on the GPU" in line and "--gpu" in line, line)
        line = one_line(run(exe, "bench", "--model", model, "--precision", "f32,f16", clip), 2,
                        "bench f32,f16")
        check("f16 runs on the GPU" in line, line)
        check(not os.path.exists(db), "a database was written for a usage error")
        print("ok --precision f16/tf32 without --gpu: exit 2,", line)

        if "cuda: yes" not in run(exe, "--version").stdout:
            line = one_line(extract("--gpu"), 3, "--gpu in a build without CUDA")
            check("this build has no CUDA backend" in line, line)
            print("ok a build without the CUDA backend:", line)
            return 0

        # the command and the library need no CUDA library to start
        linked = run("ldd", exe).stdout
        check(not any(l in linked for l in CUDA_LIBS), "vidfeat links CUDA:\n" + linked)
        if lib:
            needed = subprocess.run(["readelf", "-d", lib], capture_output=True, text=True,
                                    check=True).stdout
            check("NEEDED" in needed and not any(l in needed for l in CUDA_LIBS),
                  "libvidfeat.so needs CUDA:\n" + needed)
        print("ok ldd vidfeat%s: no CUDA library" % (" and libvidfeat.so" if lib else ""))

        env = dict(os.environ)
        env.pop("VIDFEAT_MODULE_DIR", None)
        if not nvidia_driver_loads():
            line = one_line(extract("--gpu", env=env), 3, "--gpu without a driver")
            check("no NVIDIA driver found (libcuda.so.1" in line, line)
            check(not os.path.exists(db), "a database was written although the run could not "
                                          "start")
            r = extract(env=env)
            check(r.returncode == 0 and r.stderr == "", "auto without a driver: %r" % r.stderr)
            os.remove(db)
            print("ok no driver:", line)

        fake = os.path.join(tmp, "fake")
        os.mkdir(fake)
        if not cc(tmp, "driver", "int vf_not_a_driver;\n", os.path.join(fake, "libcuda.so.1")):
            print("ok (no C compiler: the cases with a made-up driver and module are left out)")
            return 0
        env["LD_LIBRARY_PATH"] = fake + ":" + env.get("LD_LIBRARY_PATH", "")
        line = one_line(extract("--gpu", env=env), 3, "--gpu with a library that is no driver")
        check("no NVIDIA driver found (libcuda.so.1 is there but does not work)" in line, line)
        print("ok a libcuda.so.1 that is not a driver:", line)

        mods = os.path.join(tmp, "modules")
        os.mkdir(mods)
        env["VIDFEAT_MODULE_DIR"] = mods
        module = os.path.join(mods, "libvidfeat-cuda.so")
        other = ("struct m { int abi; const char *version; };\n"
                 "static const struct m m = {999, \"0.0.0\"};\n"
                 "const struct m *vfi_backend_module(void) { return &m; }\n")
        cases = [("no module", None, "libvidfeat-cuda.so: cannot open shared object file"),
                 ("not a library", b"not an ELF file\n", "libvidfeat-cuda.so: "),
                 ("another vidfeat's module", other, "not a module of this vidfeat")]
        for what, content, says in cases:
            if isinstance(content, bytes):
                with open(module, "wb") as f:
                    f.write(content)
            elif content:
                cc(tmp, "other", content, module)
            line = one_line(extract("--gpu", env=env), 3, what)
            check("the cuda backend cannot be loaded: " in line and mods in line and says in line,
                  "%s: %s" % (what, line))
            check(not os.path.exists(db), "%s: a database was written" % what)
            r = extract(env=env)
            check(r.returncode == 0 and r.stderr == "", "%s: auto: %r" % (what, r.stderr))
            os.remove(db)
            print("ok %s: --gpu exit 3 (%s); auto ran on the CPU" % (what, line))
        version = run(exe, "--version", env=env).stdout
        check("backend cuda: NVIDIA GPU: cuDNN and cuBLAS (run-time module: the cuda backend "
              "cannot be loaded" in version, version)
        print("ok --version says why the module does not load")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
