// emu_swizzles.h: the swizzle members of metal::vec (generated list: every 2-
// and 3-component swizzle of the available components, and 4-component
// permutations and broadcasts). S(name, components...) declares one member.
#pragma once
#define EMU_SWIZZLES_2(S) \
  S(xx,0,0) S(xy,0,1) S(yx,1,0) S(yy,1,1) S(xxxx,0,0,0,0) S(yyyy,1,1,1,1)
#define EMU_SWIZZLES_3(S) \
  S(xx,0,0) S(xy,0,1) S(xz,0,2) S(yx,1,0) S(yy,1,1) S(yz,1,2) \
  S(zx,2,0) S(zy,2,1) S(zz,2,2) S(xxx,0,0,0) S(xxy,0,0,1) S(xxz,0,0,2) \
  S(xyx,0,1,0) S(xyy,0,1,1) S(xyz,0,1,2) S(xzx,0,2,0) S(xzy,0,2,1) S(xzz,0,2,2) \
  S(yxx,1,0,0) S(yxy,1,0,1) S(yxz,1,0,2) S(yyx,1,1,0) S(yyy,1,1,1) S(yyz,1,1,2) \
  S(yzx,1,2,0) S(yzy,1,2,1) S(yzz,1,2,2) S(zxx,2,0,0) S(zxy,2,0,1) S(zxz,2,0,2) \
  S(zyx,2,1,0) S(zyy,2,1,1) S(zyz,2,1,2) S(zzx,2,2,0) S(zzy,2,2,1) S(zzz,2,2,2) \
  S(xxxx,0,0,0,0) S(yyyy,1,1,1,1) S(zzzz,2,2,2,2)
#define EMU_SWIZZLES_4(S) \
  S(xx,0,0) S(xy,0,1) S(xz,0,2) S(xw,0,3) S(yx,1,0) S(yy,1,1) \
  S(yz,1,2) S(yw,1,3) S(zx,2,0) S(zy,2,1) S(zz,2,2) S(zw,2,3) \
  S(wx,3,0) S(wy,3,1) S(wz,3,2) S(ww,3,3) S(xxx,0,0,0) S(xxy,0,0,1) \
  S(xxz,0,0,2) S(xxw,0,0,3) S(xyx,0,1,0) S(xyy,0,1,1) S(xyz,0,1,2) S(xyw,0,1,3) \
  S(xzx,0,2,0) S(xzy,0,2,1) S(xzz,0,2,2) S(xzw,0,2,3) S(xwx,0,3,0) S(xwy,0,3,1) \
  S(xwz,0,3,2) S(xww,0,3,3) S(yxx,1,0,0) S(yxy,1,0,1) S(yxz,1,0,2) S(yxw,1,0,3) \
  S(yyx,1,1,0) S(yyy,1,1,1) S(yyz,1,1,2) S(yyw,1,1,3) S(yzx,1,2,0) S(yzy,1,2,1) \
  S(yzz,1,2,2) S(yzw,1,2,3) S(ywx,1,3,0) S(ywy,1,3,1) S(ywz,1,3,2) S(yww,1,3,3) \
  S(zxx,2,0,0) S(zxy,2,0,1) S(zxz,2,0,2) S(zxw,2,0,3) S(zyx,2,1,0) S(zyy,2,1,1) \
  S(zyz,2,1,2) S(zyw,2,1,3) S(zzx,2,2,0) S(zzy,2,2,1) S(zzz,2,2,2) S(zzw,2,2,3) \
  S(zwx,2,3,0) S(zwy,2,3,1) S(zwz,2,3,2) S(zww,2,3,3) S(wxx,3,0,0) S(wxy,3,0,1) \
  S(wxz,3,0,2) S(wxw,3,0,3) S(wyx,3,1,0) S(wyy,3,1,1) S(wyz,3,1,2) S(wyw,3,1,3) \
  S(wzx,3,2,0) S(wzy,3,2,1) S(wzz,3,2,2) S(wzw,3,2,3) S(wwx,3,3,0) S(wwy,3,3,1) \
  S(wwz,3,3,2) S(www,3,3,3) S(xxxx,0,0,0,0) S(xyzw,0,1,2,3) S(xywz,0,1,3,2) S(xzyw,0,2,1,3) \
  S(xzwy,0,2,3,1) S(xwyz,0,3,1,2) S(xwzy,0,3,2,1) S(yxzw,1,0,2,3) S(yxwz,1,0,3,2) S(yyyy,1,1,1,1) \
  S(yzxw,1,2,0,3) S(yzwx,1,2,3,0) S(ywxz,1,3,0,2) S(ywzx,1,3,2,0) S(zxyw,2,0,1,3) S(zxwy,2,0,3,1) \
  S(zyxw,2,1,0,3) S(zywx,2,1,3,0) S(zzzz,2,2,2,2) S(zwxy,2,3,0,1) S(zwyx,2,3,1,0) S(wxyz,3,0,1,2) \
  S(wxzy,3,0,2,1) S(wyxz,3,1,0,2) S(wyzx,3,1,2,0) S(wzxy,3,2,0,1) S(wzyx,3,2,1,0) S(wwww,3,3,3,3)
