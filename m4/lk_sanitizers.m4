# LK_SANITIZERS: --enable-sanitizers builds with AddressSanitizer and UBSan.
AC_DEFUN([LK_SANITIZERS], [
  AC_ARG_ENABLE([sanitizers],
    [AS_HELP_STRING([--enable-sanitizers], [build with -fsanitize=address,undefined])],
    [], [enable_sanitizers=no])
  SAN_CFLAGS=""
  SAN_LDFLAGS=""
  AS_IF([test "x$enable_sanitizers" = xyes], [
    lk_san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
    lk_save_CFLAGS=$CFLAGS
    lk_save_LDFLAGS=$LDFLAGS
    CFLAGS="$CFLAGS $lk_san"
    LDFLAGS="$LDFLAGS $lk_san"
    AC_MSG_CHECKING([whether $CC can build with $lk_san])
    AC_LINK_IFELSE([AC_LANG_PROGRAM([], [])], [AC_MSG_RESULT([yes])],
      [AC_MSG_RESULT([no]); AC_MSG_ERROR([--enable-sanitizers: $CC cannot link with $lk_san])])
    CFLAGS=$lk_save_CFLAGS
    LDFLAGS=$lk_save_LDFLAGS
    SAN_CFLAGS=$lk_san
    SAN_LDFLAGS=$lk_san
  ])
  AC_SUBST([SAN_CFLAGS])
  AC_SUBST([SAN_LDFLAGS])
  AM_CONDITIONAL([LK_SANITIZERS], [test "x$enable_sanitizers" = xyes])
])
