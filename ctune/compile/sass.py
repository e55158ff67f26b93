"""Read a cubin's ELF: fingerprint its machine code (SASS), name its kernels, size their
parameters.

Identical compiles can differ in cubin bytes (``-lineinfo`` embeds the build path), but not
in their executable sections: the digest covers the name and bytes of each, exactly the
code ``cuobjdump -sass`` disassembles, without depending on a disassembler. A launcher's
cubins are found in its ``.nv_fatbin`` section. Parameters come from each kernel's
``.nv.info.<kernel>`` EIATTR_KPARAM_INFO records, the table the driver lays a launch's
arguments out by: no second front-end pass over the PTX.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

_ELF_MAGIC = b"\x7fELF"
_SHF_EXECINSTR = 0x4
_SHT_SYMTAB = 2
_STT_FUNC = 2
#: st_other flag of a CUDA kernel (an entry function, not a device function)
_STO_CUDA_ENTRY = 0x10
#: .nv.info records: (format, attribute, u16), then for EIFMT_SVAL that many bytes
_EIFMT_SVAL = 0x04
_EIATTR_KPARAM_INFO = 0x17
_EIATTR_CBANK_PARAM_SIZE = 0x19


@dataclass(frozen=True)
class _Section:
    name: str
    type: int
    flags: int
    offset: int
    size: int
    link: int


class NotAnElf(ValueError):
    pass


def _sections(blob: bytes) -> list[_Section]:
    if blob[:4] != _ELF_MAGIC or blob[4] != 2 or blob[5] != 1:
        raise NotAnElf("not a little-endian ELF64 image")
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    raw = []
    for i in range(shnum):
        base = shoff + i * shentsize
        name, typ, flags, _addr, offset, size, link = struct.unpack_from("<IIQQQQI", blob, base)
        raw.append((name, typ, flags, offset, size, link))
    str_off, str_size = raw[shstrndx][3], raw[shstrndx][4]
    names = blob[str_off : str_off + str_size]

    def name_at(i: int) -> str:
        end = names.index(b"\0", i)
        return names[i:end].decode(errors="replace")

    return [_Section(name_at(n), t, f, o, s, ln) for n, t, f, o, s, ln in raw]


def _elf_length(blob: bytes) -> int:
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    shentsize, shnum = struct.unpack_from("<HH", blob, 0x3A)
    end = shoff + shentsize * shnum
    for s in _sections(blob[:end] if end <= len(blob) else blob):
        if s.type != 8:  # SHT_NOBITS occupies no file bytes
            end = max(end, s.offset + s.size)
    return end


def embedded_cubins(blob: bytes) -> list[bytes]:
    """Device ELF images inside a host binary's .nv_fatbin section."""
    out = []
    for section in _sections(blob):
        if section.name != ".nv_fatbin":
            continue
        data = blob[section.offset : section.offset + section.size]
        start = data.find(_ELF_MAGIC)
        while start != -1:
            try:
                length = _elf_length(data[start:])
                out.append(data[start : start + length])
                start = data.find(_ELF_MAGIC, start + length)
            except (NotAnElf, struct.error, ValueError, IndexError):
                start = data.find(_ELF_MAGIC, start + 4)
    return out


def sass_digest(blob: bytes) -> str:
    """sha256 over (section name, bytes) of every executable section of every cubin."""
    cubins = [blob] if _is_device_elf(blob) else embedded_cubins(blob)
    if not cubins:
        raise NotAnElf("no device code found")
    h = hashlib.sha256()
    for cubin in cubins:
        for section in sorted(_sections(cubin), key=lambda s: s.name):
            if section.flags & _SHF_EXECINSTR and section.size:
                h.update(section.name.encode() + b"\0")
                h.update(cubin[section.offset : section.offset + section.size])
    return h.hexdigest()


def _is_device_elf(blob: bytes) -> bool:
    # NVIDIA device ELFs have e_machine EM_CUDA (190)
    return blob[:4] == _ELF_MAGIC and struct.unpack_from("<H", blob, 0x12)[0] == 190


def _symbols(blob: bytes) -> list[tuple[str, int, int]]:
    """(name, st_info, st_other) of every named ELF symbol (Elf64_Sym entries)."""
    sections = _sections(blob)
    out: list[tuple[str, int, int]] = []
    for section in sections:
        if section.type != _SHT_SYMTAB:
            continue
        strtab = sections[section.link]
        strings = blob[strtab.offset : strtab.offset + strtab.size]
        for base in range(section.offset, section.offset + section.size, 24):
            name_off, info, other = struct.unpack_from("<IBB", blob, base)
            if name_off:
                end = strings.index(b"\0", name_off)
                out.append((strings[name_off:end].decode(errors="replace"), info, other))
    return out


def symbol_sizes(blob: bytes) -> dict[str, int]:
    """Byte size of each named ELF symbol (``st_size``): a ``__constant__`` array's size,
    which the driver does not tell CuPy."""
    sections = _sections(blob)
    out: dict[str, int] = {}
    for section in sections:
        if section.type != _SHT_SYMTAB:
            continue
        strtab = sections[section.link]
        strings = blob[strtab.offset : strtab.offset + strtab.size]
        for base in range(section.offset, section.offset + section.size, 24):
            name_off = struct.unpack_from("<I", blob, base)[0]
            if name_off:
                end = strings.index(b"\0", name_off)
                name = strings[name_off:end].decode(errors="replace")
                out[name] = struct.unpack_from("<Q", blob, base + 16)[0]
    return out


def defined_symbols(blob: bytes) -> set[str]:
    """Names in the ELF symbol table (the cubin's kernels, device globals)."""
    return {name for name, _, _ in _symbols(blob)}


def entry_functions(blob: bytes) -> list[str]:
    """The cubin's kernels: function symbols marked as CUDA entries (static ones too).

    Device functions that were not inlined are functions as well, but not entries;
    the linkage names are as the cubin has them (mangled unless ``extern "C"``).
    """
    return sorted(
        name
        for name, info, other in _symbols(blob)
        if info & 0xF == _STT_FUNC and other & _STO_CUDA_ENTRY
    )


def kernel_param_sizes(blob: bytes, symbol: str) -> tuple[int, ...] | None:
    """Byte size of each parameter of kernel ``symbol`` in this cubin, in order; None when
    the cubin does not say it plainly (no such section, a record cut short, ordinals with
    a gap, parameters past the size the cubin gives them): the caller then reads the PTX."""
    try:
        section = next((s for s in _sections(blob) if s.name == f".nv.info.{symbol}"), None)
    except (NotAnElf, struct.error, ValueError, IndexError):
        return None
    if section is None:
        return None
    data = blob[section.offset : section.offset + section.size]
    params: dict[int, tuple[int, int]] = {}  # ordinal -> (offset, size)
    declared = 0  # EIATTR_CBANK_PARAM_SIZE: the bytes the parameters take, if given
    pos = 0
    while pos + 4 <= len(data):
        fmt, attr, value = struct.unpack_from("<BBH", data, pos)
        pos += 4
        if fmt != _EIFMT_SVAL:
            if attr == _EIATTR_CBANK_PARAM_SIZE:
                declared = value
            continue
        if pos + value > len(data):
            return None
        if attr == _EIATTR_KPARAM_INFO and value >= 12:
            _index, ordinal, offset, info = struct.unpack_from("<IHHI", data, pos)
            params[ordinal] = (offset, info >> 18)
        pos += value
    if sorted(params) != list(range(len(params))):
        return None
    if any(offset + size > declared for offset, size in params.values()):
        return None
    return tuple(params[i][1] for i in range(len(params)))
