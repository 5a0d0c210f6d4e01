# LK_LD_VERSION_SCRIPT: whether the linker takes a GNU version script
# (-Wl,--version-script).  Where it does, liblockstep exports exactly the
# symbols listed in core/liblockstep.map under the version node LOCKSTEP_0;
# elsewhere -fvisibility=hidden and LK_API alone decide what is exported.
# --disable-version-script turns it off.
AC_DEFUN([LK_LD_VERSION_SCRIPT], [
  AC_REQUIRE([AC_PROG_CC])
  AC_ARG_ENABLE([version-script],
    [AS_HELP_STRING([--disable-version-script], [do not version liblockstep's symbols with core/liblockstep.map])],
    [], [enable_version_script=check])
  lk_have_ld_version_script=no
  AS_IF([test "x$enable_version_script" != xno], [
    AC_CACHE_CHECK([whether the linker accepts --version-script], [lk_cv_ld_version_script], [
      cat > conftest.map <<_LK_EOF
LK_CONFTEST_1 { global: lk_conftest_sym; local: *; };
_LK_EOF
      lk_save_LDFLAGS=$LDFLAGS
      LDFLAGS="$LDFLAGS -Wl,--version-script=conftest.map"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[int lk_conftest_sym(void); int lk_conftest_sym(void) { return 0; }]], [[return lk_conftest_sym();]])],
        [lk_cv_ld_version_script=yes], [lk_cv_ld_version_script=no])
      LDFLAGS=$lk_save_LDFLAGS
      rm -f conftest.map])
    lk_have_ld_version_script=$lk_cv_ld_version_script
    AS_IF([test "x$enable_version_script" = xyes && test "x$lk_have_ld_version_script" != xyes],
      [AC_MSG_ERROR([--enable-version-script: the linker does not accept --version-script])])
  ])
  AM_CONDITIONAL([LK_HAVE_LD_VERSION_SCRIPT], [test "x$lk_have_ld_version_script" = xyes])
])
