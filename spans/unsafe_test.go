package spans_test

import "unsafe"

func unsafePointer(b []byte) unsafe.Pointer       { return unsafe.Pointer(unsafe.SliceData(b)) }
func unsafeStringPointer(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }
