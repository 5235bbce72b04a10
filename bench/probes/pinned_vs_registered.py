import ctypes as C
cu = C.CDLL("libcuda.so.1")
def ck(r, what):
    if r: print(what, "->", r)
    return r
ck(cu.cuInit(0), "cuInit")
dev = C.c_int(); ck(cu.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
ctx = C.c_void_p(); ck(cu.cuDevicePrimaryCtxRetain(C.byref(ctx), dev), "retain"); ck(cu.cuCtxSetCurrent(ctx), "setcurrent")
sz = 4 << 20
pinned = C.c_void_p(); ck(cu.cuMemHostAlloc(C.byref(pinned), C.c_size_t(sz), 1), "cuMemHostAlloc")
pinned0 = C.c_void_p(); ck(cu.cuMemHostAlloc(C.byref(pinned0), C.c_size_t(sz), 0), "cuMemHostAlloc0")
libc = C.CDLL("libc.so.6"); reg = C.c_void_p(); libc.posix_memalign(C.byref(reg), 4096, C.c_size_t(sz))
ck(cu.cuMemHostRegister_v2(reg, C.c_size_t(sz), 1), "register")
reg0 = C.c_void_p(); libc.posix_memalign(C.byref(reg0), 4096, C.c_size_t(sz)); ck(cu.cuMemHostRegister_v2(reg0, C.c_size_t(sz), 0), "register0")
names = {1:"CONTEXT",2:"MEMORY_TYPE",3:"DEVICE_POINTER",4:"HOST_POINTER",6:"SYNC_MEMOPS",7:"BUFFER_ID",8:"IS_MANAGED",9:"DEVICE_ORDINAL",10:"IS_LEGACY_IPC",11:"RANGE_START",12:"RANGE_SIZE",13:"MAPPED",14:"ALLOWED_HANDLE_TYPES",15:"GDR_CAPABLE",16:"ACCESS_FLAGS",17:"MEMPOOL",18:"MAPPING_SIZE",19:"MAPPING_BASE",20:"BLOCK_ID"}
for label, p in (("pinned",pinned),("pinned0",pinned0),("registered",reg),("registered0",reg0)):
    fl = C.c_uint(0); r = cu.cuMemHostGetFlags(C.byref(fl), p)
    out = [f"{label}: ptr={p.value:#x} cuMemHostGetFlags r={r} flags={fl.value:#x}"]
    for a, n in names.items():
        v = C.c_uint64(0); r = cu.cuPointerGetAttribute(C.byref(v), a, C.c_void_p(p.value + 4096))
        out.append(f"  {n}={'err%d'%r if r else hex(v.value)}")
    print(" ".join(out))
maps = open("/proc/self/maps").read().splitlines()
for label, p in (("pinned",pinned),("registered",reg)):
    for l in maps:
        a, b = (int(x,16) for x in l.split()[0].split("-"))
        if a <= p.value < b: print(label, "maps:", l)
