/*
 * bcryptprimitives.dll for a Wine older than 8.13, which has none.
 *
 * Go's Windows runtime (Go 1.22 and later) takes its random bytes from
 * ProcessPrng in bcryptprimitives.dll, which every supported Windows has.
 * Wine added it in 8.13 (stable: 9.0); Debian 12's Wine is 8.0, so a Go
 * program dies there before main. The release test builds this file with
 * mingw-w64 into the test's own Wine prefix, and only when the Wine it
 * runs lacks the DLL: ProcessPrng over RtlGenRandom (advapi32's
 * SystemFunction036), which Wine 8.0 has. Nothing of it ships.
 */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T length)
{
	while (length > 0) {
		ULONG n = length > 0x10000000 ? 0x10000000 : (ULONG)length;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		length -= n;
	}
	return TRUE;
}
