"""Benign text from the build machine for the injection detector's corpus
(corpus.py): the Go tree and module cache, Python's standard library,
Debian's manuals, and Baton's own docs. Each source goes whole to training
or to evaluation, as DATASETS.md lists."""

import glob
import gzip
import os
import re
import subprocess
import zlib

def local_benign(c, baton, rng):
    """Benign text from this machine, split by where it comes from."""
    goroot = subprocess.run(["go", "env", "GOROOT"], capture_output=True, text=True).stdout.strip()
    gofiles = sorted(glob.glob(os.path.join(goroot, "src", "*", "*.go")) + glob.glob(os.path.join(goroot, "src", "*", "*", "*.go")))
    gofiles = [f for f in gofiles if "testdata" not in f]
    rng.shuffle(gofiles)
    for f in gofiles[:2500]:
        pkg = os.path.relpath(f, os.path.join(goroot, "src")).split(os.sep)[0]
        split = "train" if pkg[0] < "n" else "eval"
        for ch in chunks(open(f, encoding="utf-8", errors="replace").read(), 4000)[:2]:
            c.add("go-src", split, 0, "", "code", ch)
    for f in sorted(glob.glob(os.path.join(goroot, "src", "**", "testdata", "*.json"), recursive=True))[:300]:
        txt = open(f, encoding="utf-8", errors="replace").read()
        if len(txt) < 20000:
            c.add("go-json", "eval", 0, "", "tool", txt)
    for f in sorted(glob.glob(os.path.join(goroot, "doc", "*.html"))):
        for ch in chunks(open(f, encoding="utf-8").read(), 4000):
            c.add("go-doc", "eval", 0, "", "web", ch)
    pylib = os.path.dirname(os.__file__)
    for f in sorted(glob.glob(os.path.join(pylib, "test", "test_email", "data", "msg_*.txt"))):
        c.add("python-email", "eval", 0, "", "email", open(f, encoding="utf-8", errors="replace").read())
    pyfiles = sorted(glob.glob(os.path.join(pylib, "*.py")))
    rng.shuffle(pyfiles)
    pyfiles = [f for f in sorted(glob.glob(os.path.join(pylib, "**", "*.py"), recursive=True)) if "site-packages" not in f]
    rng.shuffle(pyfiles)
    for f in pyfiles[:1500]:
        for ch in chunks(open(f, encoding="utf-8", errors="replace").read(), 4000)[:2]:
            c.add("python-src", "train", 0, "", "code", ch)
    # Module documentation in the Go module cache (this repository's
    # dependencies): READMEs, changelogs, guides, some about language-model
    # APIs. Whole modules go to one side.
    modcache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True).stdout.strip()
    for f in sorted(glob.glob(os.path.join(modcache, "**", "*.md"), recursive=True)):
        mod = os.path.relpath(f, modcache).split("@")[0]
        split = "eval" if zlib.crc32(mod.encode()) % 4 == 0 else "train"
        for ch in chunks(open(f, encoding="utf-8", errors="replace").read())[:6]:
            c.add("go-modules", split, 0, "", "web", ch)
    for f in sorted(glob.glob("/usr/share/doc/**/*.html", recursive=True)):
        if not os.path.isfile(f):
            continue
        pkg = f.split("/")[4]
        split = "train" if pkg in ("libxslt1-dev", "valgrind") else "eval"
        for ch in chunks(open(f, encoding="utf-8", errors="replace").read(), 4000)[:4]:
            c.add("debian-html", split, 0, "", "web", ch)
    for f in sorted(glob.glob("/usr/share/doc/*/README*")):
        if os.path.isfile(f) and not f.endswith(".gz"):
            for ch in chunks(open(f, encoding="utf-8", errors="replace").read())[:2]:
                c.add("debian-readme", "train", 0, "", "web", ch)
    for f in sorted(glob.glob(os.path.join(baton, "docs", "*.md"))):
        name = os.path.basename(f)
        split = "eval" if name in ("untrusted-content.md", "problems.md", "gates.md", "injection-eval.md") else "train"
        if name == "injection-eval.md":
            continue
        for ch in chunks(open(f, encoding="utf-8").read()):
            c.add("baton-docs", split, 0, "", "about" if name == "untrusted-content.md" else "web", ch)
    # Manual pages in other languages: benign text that is not English.
    for lang in ("de", "fr", "sv", "pt", "nl", "it", "pl", "es", "ru", "ja", "zh_CN", "ko", "cs", "da", "fi", "hu", "tr", "uk", "ro", "vi"):
        for f in sorted(glob.glob(f"/usr/share/man/{lang}/man*/*.gz"))[:60]:
            try:
                raw = gzip.open(f).read().decode("utf-8", "replace")
            except OSError:
                continue
            txt = "\n".join(re.sub(r"\\f[BIRP]|\\-|\\&|\\\(..", "", l) for l in raw.splitlines()
                            if not l.startswith((".\\\"", "'\\\"")) and not re.match(r"^\.(TH|SH|SS|PP|TP|IP|B|I|BR|IR|RB|RI|br|sp|nf|fi|in|ti|ds|de|if|ie|el|so|\\\")\b", l))
            for ch in chunks(txt)[:2]:
                c.add("man-" + lang, "train", 0, "", "web", ch)
    # Tables: CSV and markdown renderings of the held-out tabular data.
    for f in ("/usr/share/distro-info/ubuntu.csv", "/usr/share/distro-info/debian.csv"):
        if os.path.exists(f):
            c.add("distro-info", "eval", 0, "", "table", open(f, encoding="utf-8").read())


def chunks(text, size=3000):
    """Splits a long text at paragraph boundaries into pieces of about size bytes."""
    out, cur = [], ""
    for para in re.split(r"\n\s*\n", text):
        if cur and len(cur) + len(para) > size:
            out.append(cur)
            cur = ""
        cur = cur + "\n\n" + para if cur else para
    if cur:
        out.append(cur)
    return out
