"""backend.py - the build backend of attnd's Python client (PEP 517, with PEP 660's editable
install), written with the standard library alone so that `pip install clients/python` needs
neither setuptools nor wheel, and so no network: pip runs it from this folder (pyproject.toml's
backend-path).

It builds a pure-Python wheel (py3-none-any) of the package attnd_client/ with the metadata of
pyproject.toml's [project] table, an sdist of the folder, and an editable wheel that puts the
folder on sys.path. Every file it writes is dated 1980-01-01, so a build is the same bytes each
time.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # clients/python
PACKAGE = "attnd_client"
EPOCH = (1980, 1, 1, 0, 0, 0)


def read_toml(text):
    """The tables of pyproject.toml as {table: {key: value}}: tomllib's reading from Python 3.11
    on, read_toml_simple's before it."""
    try:
        import tomllib
    except ImportError:
        return read_toml_simple(text)
    return tomllib.loads(text)


def read_toml_simple(text):
    """read_toml for the forms pyproject.toml uses and no others: `[table]` headers,
    `key = "string"` and `key = ["string", ...]` on one line, whole-line comments."""
    tables, table = {}, None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.fullmatch(r"\[([\w.-]+)\]", line)
        if m:
            table = tables.setdefault(m.group(1), {})
            continue
        key, _, value = (s.strip() for s in line.partition("="))
        strings = re.findall(r'"([^"]*)"', value)
        table[key] = strings if value.startswith("[") else strings[0]
    return tables


def project():
    with open(os.path.join(HERE, "pyproject.toml"), encoding="utf-8") as f:
        return read_toml(f.read())["project"]


def _names(p):
    """(distribution name for file names, version)."""
    return re.sub(r"[-_.]+", "_", p["name"]).lower(), p["version"]


def _metadata(p):
    lines = ["Metadata-Version: 2.1", f"Name: {p['name']}", f"Version: {p['version']}",
             f"Summary: {p.get('description', '')}"]
    if "requires-python" in p:
        lines.append(f"Requires-Python: {p['requires-python']}")
    lines += [f"Requires-Dist: {d}" for d in p.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def _sources():
    """The package's files: (path in the archive, bytes), sorted."""
    out = []
    root = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(root)):
        if name.endswith(".py"):
            with open(os.path.join(root, name), "rb") as f:
                out.append((f"{PACKAGE}/{name}", f.read()))
    return out


def _wheel(directory, files):
    """Writes a py3-none-any wheel of files ((path, bytes)) plus its dist-info; its name."""
    p = project()
    dist, version = _names(p)
    info = f"{dist}-{version}.dist-info"
    files = list(files) + [
        (f"{info}/METADATA", _metadata(p).encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: attnd-client backend\n"
                          b"Root-Is-Purelib: true\nTag: py3-none-any\n"),
    ]
    record = []
    for path, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    files.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode()))
    name = f"{dist}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files:
            entry = zipfile.ZipInfo(path, EPOCH)
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return name


# ---- PEP 517 and PEP 660 hooks ------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _wheel(wheel_directory, _sources())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding only a .pth file that puts this folder on sys.path."""
    return _wheel(wheel_directory, [(f"{PACKAGE}.pth", (HERE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    p = project()
    dist, version = _names(p)
    top = f"{dist}-{version}"
    files = [(f"{top}/{path}", data) for path, data in _sources()]
    for path in ("pyproject.toml", "_build/backend.py"):
        with open(os.path.join(HERE, path), "rb") as f:
            files.append((f"{top}/{path}", f.read()))
    files.append((f"{top}/PKG-INFO", _metadata(p).encode()))
    name = f"{top}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for path, data in files:
            entry = tarfile.TarInfo(path)
            entry.size, entry.mode, entry.mtime = len(data), 0o644, 315532800
            t.addfile(entry, io.BytesIO(data))
    return name
