"""Raw cost of one durable 1 KiB record on this disk: append +
fdatasync (memoir), overwrite of preallocated space + fdatasync (what
SQLite's WAL does), fallocate(KEEP_SIZE) ahead then append + fdatasync, and
O_DSYNC appends; interleaved rounds of 300, median, ratio to the overwrite.

Usage: python3 crates/memoir-bench/peers/sync_costs.py [ROUNDS] [DIR]
(DIR must be on the file system under test; its *.dat files are removed.)
"""
import os, time, sys, ctypes, statistics
libc=ctypes.CDLL(None,use_errno=True)
N=300; R=int(sys.argv[1]) if len(sys.argv)>1 else 6
line=b'x'*1023+b'\n'
D=sys.argv[2] if len(sys.argv)>2 else '.'
def mk(name, flags=0, keep=False, pre=False):
    p=f'{D}/{name}.dat'
    if os.path.exists(p): os.unlink(p)
    fd=os.open(p, os.O_RDWR|os.O_CREAT|(0 if pre else os.O_APPEND)|flags,0o600)
    if keep: assert libc.fallocate(fd,1,ctypes.c_long(0),ctypes.c_long(N*1024*R+(1<<20)))==0
    if pre: os.write(fd,b'\0'*(N*1024*R)); os.fsync(fd)
    os.fsync(fd); return fd
cases={
 'append + fdatasync (memoir today)': (mk('a'), lambda fd,i: (os.write(fd,line), os.fdatasync(fd))),
 'overwrite preallocated + fdatasync (SQLite WAL-like)': (mk('o',pre=True), lambda fd,i: (os.pwrite(fd,line,i*1024), os.fdatasync(fd))),
 'fallocate KEEP_SIZE, append + fdatasync': (mk('k',keep=True), lambda fd,i: (os.write(fd,line), os.fdatasync(fd))),
 'O_DSYNC append': (mk('d',flags=os.O_DSYNC), lambda fd,i: os.write(fd,line)),
}
rates={k:[] for k in cases}; cnt={k:0 for k in cases}
for r in range(R):
    for k,(fd,op) in cases.items():
        t=time.perf_counter()
        for i in range(N): op(fd,cnt[k]); cnt[k]+=1
        rates[k].append(N/(time.perf_counter()-t))
base=statistics.median(rates['overwrite preallocated + fdatasync (SQLite WAL-like)'])
for k,v in rates.items():
    m=statistics.median(v); print(f'| {k} | {m:.0f} | {m/base:.2f}x | {min(v):.0f}–{max(v):.0f} |')
for name in 'akod':
    p=f'{D}/{name}.dat'
    if os.path.exists(p): os.unlink(p)
