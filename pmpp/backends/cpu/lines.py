"""Source lines of a built module's code, read from its DWARF debug information with pyelftools.

:func:`frames` answers what ``addr2line -i`` prints for an address: the line-table location of
the instruction, then, for every inlined call it lies in, innermost first, the line of that
call. An ELF module (Linux) carries its DWARF itself.

On macOS the linker leaves DWARF in the object file, which the library names (its debug map);
``dsymutil`` (Xcode's command line tools) gathers it into ``module.dylib.dSYM``, made here at the
first lookup, whose DWARF file is a Mach-O file that :class:`_MachO` reads the debug sections of.

A module is read once (per path, size and modification time): its line table and the address
ranges of its inlined calls are kept for the lookups that follow.
"""

import bisect
import functools
import io
import os
import shutil
import struct
import subprocess
from pathlib import Path

from elftools.common.exceptions import ELFError, DWARFError
from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo
from elftools.dwarf.ranges import BaseAddressEntry
from elftools.elf.elffile import ELFFile


def frames(library, offsets):
    """``{offset: [(file, line), ...]}`` for code ``offsets`` of ``library`` (from its load
    address, each the instruction's own): the instruction's line first, then the lines of the
    inlined calls that contain it, innermost first. Offsets without a line are left out."""
    index = module_index(library)
    if index is None:
        return {}
    found = {}
    for offset in offsets:
        chain = index.frames(int(offset))
        if chain:
            found[int(offset)] = chain
    return found


def module_index(library):
    """The :class:`LineIndex` of ``library``, or None when it has no readable DWARF."""
    try:
        st = os.stat(library)
    except OSError:
        return None
    return _index_of(str(library), st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=64)
def _index_of(path, size, mtime_ns):
    del size, mtime_ns  # part of the cache key only: a rebuilt module is read again
    try:
        with open(path, "rb") as stream:
            dwarf = _dwarf_of(stream, path)
            return LineIndex(dwarf) if dwarf is not None else None
    except (OSError, ELFError, DWARFError, struct.error, ValueError, KeyError):
        return None


def _dwarf_of(stream, path):
    magic = stream.read(4)
    stream.seek(0)
    if magic == b"\x7fELF":
        elf = ELFFile(stream)
        return elf.get_dwarf_info(relocate_dwarf_sections=False) if elf.has_dwarf_info() else None
    if magic in _MachO.MAGICS:
        uuid = _MachO(stream).uuid
        dwarf = _dsym_dwarf(path, uuid)
        if dwarf is None and make_dsym(path):
            dwarf = _dsym_dwarf(path, uuid)
        return dwarf
    return None


def _dsym_dwarf(library, uuid):
    """The DWARF of ``library``'s dSYM bundle, if it has one made from this very link (a bundle
    left from an earlier build of the same path has another UUID)."""
    dsym = dsym_dwarf_file(library)
    if dsym is None:
        return None
    with open(dsym, "rb") as debug:
        dwarf_file = _MachO(debug)
        return dwarf_file.dwarf() if dwarf_file.uuid == uuid else None


def dsym_dwarf_file(library):
    """The DWARF file of ``library``'s dSYM bundle (``dsymutil library`` makes
    ``library.dSYM/Contents/Resources/DWARF/<name>``), or None."""
    folder = Path(f"{library}.dSYM") / "Contents" / "Resources" / "DWARF"
    candidates = sorted(folder.glob("*")) if folder.is_dir() else []
    return candidates[0] if candidates else None


def make_dsym(library, timeout=120):
    """Run ``dsymutil`` on a Mach-O ``library`` (its object files must still be where the link
    found them), replacing any older ``library.dSYM``. False where there is no dsymutil or it
    failed."""
    dsymutil = shutil.which("dsymutil")
    if dsymutil is None:
        return False
    final = Path(f"{library}.dSYM")
    tmp = Path(f"{library}.dSYM.{os.getpid()}.tmp")
    try:
        done = subprocess.run([dsymutil, str(library), "-o", str(tmp)], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout).returncode == 0
        if done:
            shutil.rmtree(final, ignore_errors=True)
            os.replace(tmp, final)
        return done
    except (OSError, subprocess.SubprocessError):
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class LineIndex:
    """A module's line table and inlined-call ranges, for lookups by code offset."""

    def __init__(self, dwarf):
        self.rows = []      # (address, file, line), sorted; file None ends a sequence
        self.inlined = []   # (low, high, depth, call file, call line)
        for cu in dwarf.iter_CUs():
            files = _file_names(dwarf, cu)
            self._add_line_rows(dwarf.line_program_for_CU(cu), files)
            self._add_inlined_calls(cu, files)
        # where one sequence ends and another starts, the start holds
        self.rows.sort(key=lambda row: (row[0], row[1] is not None))
        self.row_addresses = [row[0] for row in self.rows]
        self.inlined.sort()
        self.inlined_lows = [call[0] for call in self.inlined]

    def _add_line_rows(self, program, files):
        if program is None:
            return
        sequence = []
        for entry in program.get_entries():
            state = entry.state
            if state is None:
                continue
            if state.end_sequence:
                self._add_sequence(sequence, state.address)
                sequence = []
            else:
                sequence.append((state.address, files.get(state.file), state.line))

    def _add_sequence(self, sequence, end):
        # Of rows at one address, the last one holds (the earlier ones describe no instruction).
        by_address = {}
        for address, file, line in sequence:
            by_address[address] = (address, file, line)
        self.rows.extend(by_address.values())
        self.rows.append((end, None, 0))

    def _add_inlined_calls(self, cu, files):
        stack = [(cu.get_top_DIE(), 0)]
        while stack:
            die, depth = stack.pop()
            for child in die.iter_children():
                if child.tag in _HOLDS_CODE:
                    inner = depth
                    if child.tag == "DW_TAG_inlined_subroutine":
                        inner = depth + 1
                        self._add_call(cu, child, files, inner)
                    stack.append((child, inner))

    def _add_call(self, cu, die, files, depth):
        attrs = die.attributes
        if "DW_AT_call_file" not in attrs or "DW_AT_call_line" not in attrs:
            return
        file = files.get(attrs["DW_AT_call_file"].value)
        for low, high in _die_ranges(cu, die):
            self.inlined.append((low, high, depth, file, attrs["DW_AT_call_line"].value))

    def frames(self, address):
        """``[(file, line), ...]`` at ``address``: its line, then its inlined calls' lines."""
        at = bisect.bisect_right(self.row_addresses, address) - 1
        if at < 0 or self.rows[at][1] is None:
            return []
        chain = [(self.rows[at][1], self.rows[at][2])]
        calls = [c for c in self.inlined[:bisect.bisect_right(self.inlined_lows, address)]
                 if c[1] > address and c[3] is not None]
        calls.sort(key=lambda c: -c[2])
        chain += [(file, line) for _, _, _, file, line in calls]
        return chain


# DIEs that code, and so inlined calls, can lie in. Types and declarations are not walked
# (pyelftools steps over them through DW_AT_sibling where the compiler gave one).
_HOLDS_CODE = {"DW_TAG_subprogram", "DW_TAG_inlined_subroutine", "DW_TAG_lexical_block",
               "DW_TAG_namespace", "DW_TAG_try_block", "DW_TAG_catch_block"}


def _file_names(dwarf, cu):
    """``{file index: path}`` of a compile unit's line program, joined with the include directory
    and the compilation directory as addr2line joins them."""
    program = dwarf.line_program_for_CU(cu)
    if program is None:
        return {}
    top = cu.get_top_DIE().attributes
    comp_dir = _text(top["DW_AT_comp_dir"].value) if "DW_AT_comp_dir" in top else ""
    version = program.header.version
    dirs = [_text(d) for d in program.header.include_directory]
    if version < 5:
        dirs = [comp_dir] + dirs  # directory index 0 is the compilation directory
    names = {}
    first = 0 if version >= 5 else 1
    for k, entry in enumerate(program.header.file_entry):
        name = _text(entry.name)
        folder = dirs[entry.dir_index] if entry.dir_index < len(dirs) else ""
        names[k + first] = os.path.join(comp_dir, folder, name)
    return names


def _text(value):
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _die_ranges(cu, die):
    """``[(low, high), ...]`` of the code of ``die`` (DW_AT_low_pc/high_pc or DW_AT_ranges)."""
    attrs = die.attributes
    if "DW_AT_ranges" in attrs:
        return _range_list(cu, die)
    if "DW_AT_low_pc" not in attrs or "DW_AT_high_pc" not in attrs:
        return []
    low = attrs["DW_AT_low_pc"].value
    high = attrs["DW_AT_high_pc"]
    # DWARF 4 and later: a constant class high_pc is the length, an address class one the end
    end = high.value if high.form == "DW_FORM_addr" or high.form.startswith("DW_FORM_addrx") \
        else low + high.value
    return [(low, end)]


def _range_list(cu, die):
    dwarf = cu.dwarfinfo
    lists = dwarf.range_lists()
    if lists is None:
        return []
    attr = die.attributes["DW_AT_ranges"]
    offset = attr.value
    if attr.form == "DW_FORM_rnglistx":
        offset = _rnglistx_offset(dwarf, cu, attr.value)
    top = cu.get_top_DIE().attributes
    base = top["DW_AT_low_pc"].value if "DW_AT_low_pc" in top else 0
    found = []
    for entry in lists.get_range_list_at_offset(offset, cu=cu):
        if isinstance(entry, BaseAddressEntry):
            base = entry.base_address
        elif entry.is_absolute:
            found.append((entry.begin_offset, entry.end_offset))
        else:
            found.append((base + entry.begin_offset, base + entry.end_offset))
    return [r for r in found if r[1] > r[0]]


def _rnglistx_offset(dwarf, cu, index):
    top = cu.get_top_DIE().attributes
    base = top["DW_AT_rnglists_base"].value if "DW_AT_rnglists_base" in top else 0
    size = 8 if cu["is64"] else 4
    stream = dwarf.debug_rnglists_sec.stream
    stream.seek(dwarf.debug_rnglists_sec.global_offset + base + index * size)
    (relative,) = struct.unpack("<Q" if size == 8 else "<I", stream.read(size))
    return base + relative


class _MachO:
    """The DWARF sections of a 64-bit little-endian Mach-O file (a dSYM's DWARF file, or an
    object file), as <mach-o/loader.h> lays them out: a header, then load commands; each
    LC_SEGMENT_64 lists its sections (name, segment, address, size, file offset)."""

    MAGICS = (b"\xcf\xfa\xed\xfe",)   # MH_MAGIC_64, little-endian (arm64 and x86_64)
    LC_SEGMENT_64, LC_UUID = 0x19, 0x1B
    CPU_TYPE_ARM64, CPU_TYPE_X86_64 = 0x0100000C, 0x01000007

    def __init__(self, stream):
        self.stream = stream
        header = stream.read(32)
        magic, cputype, _, _, ncmds, _, _, _ = struct.unpack("<4sIIIIIII", header)
        if magic not in self.MAGICS:
            raise ValueError("not a 64-bit little-endian Mach-O file")
        self.machine = {self.CPU_TYPE_ARM64: "AArch64", self.CPU_TYPE_X86_64: "x64"}.get(cputype, "")
        self.sections = {}
        self.uuid = None   # the link's identity, which dsymutil copies into the dSYM
        offset = 32
        for _ in range(ncmds):
            stream.seek(offset)
            cmd, cmdsize = struct.unpack("<II", stream.read(8))
            if cmd == self.LC_SEGMENT_64:
                self._read_segment(offset)
            elif cmd == self.LC_UUID:
                self.uuid = stream.read(16)
            offset += cmdsize

    def _read_segment(self, offset):
        self.stream.seek(offset + 8 + 16 + 8 * 4 + 4 * 2)   # cmd, cmdsize, segname, 4 u64, 2 prot
        (nsects, _) = struct.unpack("<II", self.stream.read(8))
        for k in range(nsects):
            self.stream.seek(offset + 72 + 80 * k)
            sectname, segname, _addr, size, fileoff = struct.unpack("<16s16sQQI", self.stream.read(52))
            if segname.rstrip(b"\0") == b"__DWARF":
                self.sections[sectname.rstrip(b"\0").decode()] = (fileoff, size)

    def _section(self, name):
        # Mach-O names are cut at 16 characters: __debug_str_offs is .debug_str_offsets
        if name not in self.sections:
            return None
        fileoff, size = self.sections[name]
        self.stream.seek(fileoff)
        data = self.stream.read(size)
        return DebugSectionDescriptor(io.BytesIO(data), name, None, size, 0)

    def dwarf(self):
        if "__debug_info" not in self.sections:
            return None
        s = self._section
        return DWARFInfo(
            config=DwarfConfig(little_endian=True, machine_arch=self.machine, default_address_size=8),
            debug_info_sec=s("__debug_info"), debug_aranges_sec=s("__debug_aranges"),
            debug_abbrev_sec=s("__debug_abbrev"), debug_frame_sec=None, eh_frame_sec=None,
            debug_str_sec=s("__debug_str"), debug_loc_sec=s("__debug_loc"),
            debug_ranges_sec=s("__debug_ranges"), debug_line_sec=s("__debug_line"),
            debug_pubtypes_sec=None, debug_pubnames_sec=None, debug_addr_sec=s("__debug_addr"),
            debug_str_offsets_sec=s("__debug_str_offs"), debug_line_str_sec=s("__debug_line_str"),
            debug_loclists_sec=s("__debug_loclists"), debug_rnglists_sec=s("__debug_rnglists"),
            debug_sup_sec=None, gnu_debugaltlink_sec=None, debug_types_sec=None)
