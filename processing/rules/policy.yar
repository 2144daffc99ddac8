/*
  File-type policy: what has no business inside an image or a PDF we serve.

  These are not malware signatures. They flag files whose own type (the magic at
  offset 0) says image or PDF while their bytes carry something executable: a
  polyglot made to slip a program or a script past an upload filter. Each needs two
  independent structures to agree (a PE's MZ header AND its PE signature where that
  header points), so random compressed pixel data does not trip them.

  Deliberately NOT flagged: PHP in image metadata (we never execute uploads, and the
  served copy has no metadata), a lone "<script>" in pixel data (fuzzdb's
  lottapixel.jpg carries several), PDF JavaScript (forms use it; see the corpus note on
  testPDF_jsActionOnPage.pdf). Tests: tests/scanners/test_yara_policy.py, one per rule.
*/

private rule Image_Magic
{
    condition:
        uint16be(0) == 0xFFD8 or                         // JPEG
        uint32be(0) == 0x89504E47 or                     // PNG
        uint32be(0) == 0x47494638 or                     // GIF8
        (uint32be(0) == 0x52494646 and uint32be(8) == 0x57454250)  // RIFF....WEBP
}

private rule Pdf_Magic
{
    strings:
        $pdf = "%PDF-"
    condition:
        $pdf in (0 .. 1024)  // readers accept a header within the first 1 KiB
}

private rule Embedded_Windows_Executable
{
    strings:
        $mz = "MZ"
    condition:
        for any i in (1 .. #mz) : (
            @mz[i] > 0 and
            uint32(@mz[i] + 0x3C) >= 0x40 and uint32(@mz[i] + 0x3C) < 0x1000 and
            uint32(@mz[i] + uint32(@mz[i] + 0x3C)) == 0x00004550  // "PE\0\0"
        )
}

private rule Embedded_Elf_Executable
{
    strings:
        // \x7fELF, class 32/64-bit, data LE/BE, version 1, then a SysV/GNU/FreeBSD ABI
        $elf = { 7F 45 4C 46 (01 | 02) (01 | 02) 01 (00 | 03 | 09) }
    condition:
        for any i in (1 .. #elf) : (
            @elf[i] > 0 and
            // e_type executable, shared object or core, and a known machine (x86, ARM, x86-64, AArch64, RISC-V)
            uint16(@elf[i] + 16) >= 2 and uint16(@elf[i] + 16) <= 4 and
            (uint16(@elf[i] + 18) == 3 or uint16(@elf[i] + 18) == 40 or uint16(@elf[i] + 18) == 62 or
             uint16(@elf[i] + 18) == 183 or uint16(@elf[i] + 18) == 243)
        )
}

rule Image_Hides_Executable
{
    meta:
        description = "an image that carries a Windows (PE) or Linux (ELF) executable"
    condition:
        Image_Magic and (Embedded_Windows_Executable or Embedded_Elf_Executable)
}

rule Image_Hides_Html_Script
{
    meta:
        description = "an image that carries a complete HTML script element (content-sniffing polyglot)"
    strings:
        $open = "<script" nocase
        $close = "</script>" nocase
    condition:
        Image_Magic and $open and $close and @close[#close] > @open[1]
}

rule Pdf_Hides_Executable
{
    meta:
        description = "a PDF that carries an uncompressed Windows (PE) or Linux (ELF) executable"
    condition:
        Pdf_Magic and (Embedded_Windows_Executable or Embedded_Elf_Executable)
}

rule Pdf_Launch_Action
{
    meta:
        description = "a PDF with a /Launch action (asks the reader to run a program or open a file)"
    strings:
        $launch = /\/S\s*\/Launch[\s\/<>\[\]()]/
    condition:
        Pdf_Magic and $launch
}
