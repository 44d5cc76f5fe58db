// LOAD8 loads eight floats at byte offset R10 of eight rows (AX, BX, CX,
// DX, SI, DI, R8, R9) into Y0..Y7.
#define LOAD8 \
	VMOVUPS (AX)(R10*1), Y0 \
	VMOVUPS (BX)(R10*1), Y1 \
	VMOVUPS (CX)(R10*1), Y2 \
	VMOVUPS (DX)(R10*1), Y3 \
	VMOVUPS (SI)(R10*1), Y4 \
	VMOVUPS (DI)(R10*1), Y5 \
	VMOVUPS (R8)(R10*1), Y6 \
	VMOVUPS (R9)(R10*1), Y7

// TRANSPOSE8 turns eight rows of eight floats (Y0..Y7: row a..h) into
// eight columns (Y8..Y15: column j holds a_j .. h_j); Y0-Y7 are
// overwritten. Shared by the kernels that run a lane a row
// (exp64_amd64.s, rmsnorm_amd64.s).
#define TRANSPOSE8 \
	VUNPCKLPS Y1, Y0, Y8 \
	VUNPCKHPS Y1, Y0, Y9 \
	VUNPCKLPS Y3, Y2, Y10 \
	VUNPCKHPS Y3, Y2, Y11 \
	VUNPCKLPS Y5, Y4, Y12 \
	VUNPCKHPS Y5, Y4, Y13 \
	VUNPCKLPS Y7, Y6, Y14 \
	VUNPCKHPS Y7, Y6, Y15 \
	VSHUFPS $0x44, Y10, Y8, Y0 \
	VSHUFPS $0xEE, Y10, Y8, Y1 \
	VSHUFPS $0x44, Y11, Y9, Y2 \
	VSHUFPS $0xEE, Y11, Y9, Y3 \
	VSHUFPS $0x44, Y14, Y12, Y4 \
	VSHUFPS $0xEE, Y14, Y12, Y5 \
	VSHUFPS $0x44, Y15, Y13, Y6 \
	VSHUFPS $0xEE, Y15, Y13, Y7 \
	VPERM2F128 $0x20, Y4, Y0, Y8 \
	VPERM2F128 $0x20, Y5, Y1, Y9 \
	VPERM2F128 $0x20, Y6, Y2, Y10 \
	VPERM2F128 $0x20, Y7, Y3, Y11 \
	VPERM2F128 $0x31, Y4, Y0, Y12 \
	VPERM2F128 $0x31, Y5, Y1, Y13 \
	VPERM2F128 $0x31, Y6, Y2, Y14 \
	VPERM2F128 $0x31, Y7, Y3, Y15
