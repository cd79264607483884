#!/usr/bin/env python3
"""Reference timing: YOLOv5n's architecture (1,872,157 parameters, as YOLOv5 v7.0) written in plain
PyTorch, forward + backward of one 16 x 3 x 320 x 320 batch, on the Python torch of this machine
(Debian's python3-torch, the same libtorch our trainer links). Usage:
    /usr/bin/python3 scripts/bench_pytorch_yolov5n.py [THREADS]
It compares model compute only (no loss): our trainer prints its forward+loss and backward times
per epoch; divide by the number of batches."""
import torch, torch.nn as nn, time, sys
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv)>1 else 1)
def ap(k): return k//2
class Conv(nn.Module):
    def __init__(s,c1,c2,k=1,st=1,p=None):
        super().__init__(); s.conv=nn.Conv2d(c1,c2,k,st,ap(k) if p is None else p,bias=False); s.bn=nn.BatchNorm2d(c2,eps=1e-3,momentum=0.03); s.act=nn.SiLU()
    def forward(s,x): return s.act(s.bn(s.conv(x)))
class Bott(nn.Module):
    def __init__(s,c1,c2,sh=True):
        super().__init__(); s.cv1=Conv(c1,c2,1); s.cv2=Conv(c2,c2,3); s.add=sh and c1==c2
    def forward(s,x): return x+s.cv2(s.cv1(x)) if s.add else s.cv2(s.cv1(x))
class C3(nn.Module):
    def __init__(s,c1,c2,n=1,sh=True):
        super().__init__(); c_=c2//2; s.cv1=Conv(c1,c_); s.cv2=Conv(c1,c_); s.cv3=Conv(2*c_,c2); s.m=nn.Sequential(*[Bott(c_,c_,sh) for _ in range(n)])
    def forward(s,x): return s.cv3(torch.cat((s.m(s.cv1(x)),s.cv2(x)),1))
class SPPF(nn.Module):
    def __init__(s,c1,c2):
        super().__init__(); c_=c1//2; s.cv1=Conv(c1,c_); s.cv2=Conv(c_*4,c2); s.m=nn.MaxPool2d(5,1,2)
    def forward(s,x):
        x=s.cv1(x); y1=s.m(x); y2=s.m(y1); return s.cv2(torch.cat((x,y1,y2,s.m(y2)),1))
class M(nn.Module):
    def __init__(s,nc=80):
        super().__init__()
        s.b=nn.ModuleList([Conv(3,16,6,2,2),Conv(16,32,3,2),C3(32,32,1),Conv(32,64,3,2),C3(64,64,2),Conv(64,128,3,2),C3(128,128,3),Conv(128,256,3,2),C3(256,256,1),SPPF(256,256),
          Conv(256,128,1,1),nn.Upsample(None,2,'nearest'),C3(256,128,1,False),Conv(128,64,1,1),nn.Upsample(None,2,'nearest'),C3(128,64,1,False),Conv(64,64,3,2),C3(128,128,1,False),Conv(128,128,3,2),C3(256,256,1,False)])
        s.det=nn.ModuleList([nn.Conv2d(c,3*(nc+5),1) for c in (64,128,256)])
    def forward(s,x):
        b=s.b; x=b[0](x);x=b[1](x);x=b[2](x);x=b[3](x);p4=b[4](x);x=b[5](p4);p6=b[6](x);x=b[7](p6);x=b[8](x);x=b[9](x)
        h10=b[10](x);x=b[11](h10);x=torch.cat((x,p6),1);x=b[12](x);h14=b[13](x);x=b[14](h14);x=torch.cat((x,p4),1);o17=b[15](x)
        x=b[16](o17);x=torch.cat((x,h14),1);o20=b[17](x);x=b[18](o20);x=torch.cat((x,h10),1);o23=b[19](x)
        return [d(o) for d,o in zip(s.det,(o17,o20,o23))]
m=M(); m.train()
print(sum(p.numel() for p in m.parameters()))
x=torch.rand(16,3,320,320)
for it in range(4):
    t0=time.time(); out=m(x); l=sum(o.square().mean() for o in out); t1=time.time(); l.backward(); t2=time.time()
    print(f"fwd {t1-t0:.3f} bwd {t2-t1:.3f}")
