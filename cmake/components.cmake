# What a component of obsaug does when a dependency is missing.
# OBSAUG_REQUIRE_ALL=OFF (the default, e.g. a GPU machine without the image
# libraries): the component is skipped with a status line, and whatever
# needs it (bindings, tests, the CLI) leaves it out. OBSAUG_REQUIRE_ALL=ON
# (scripts/test.sh, CI): a configure error naming what to install, so no
# component goes untested unnoticed. Every missing dependency is reported
# (SEND_ERROR) before the configure fails.

# obsaug_skip_component(<component> <missing>...): each <missing> names a
# dependency and its Debian package, e.g. "libpng (Debian: libpng-dev)".
# Each skip is also kept in the global property OBSAUG_SKIPPED_COMPONENTS
# ("<component>: missing <missing>"), which bindings/ builds into
# obsaug._C.skipped_components: `import obsaug` names what is missing and why.
function(obsaug_skip_component component)
  list(JOIN ARGN ", " _missing)
  set_property(GLOBAL APPEND PROPERTY OBSAUG_SKIPPED_COMPONENTS "${component}: missing ${_missing}")
  if(OBSAUG_REQUIRE_ALL)
    message(SEND_ERROR
      "obsaug: ${component} cannot be built: missing ${_missing}. "
      "OBSAUG_REQUIRE_ALL=ON requires every component: install the package named, "
      "or configure with -DOBSAUG_REQUIRE_ALL=OFF to build without ${component}.")
  else()
    message(STATUS "obsaug: ${component} skipped: missing ${_missing}")
  endif()
endfunction()
