# trainhooks_header_reaches(ROOT REL REGEX OUT): OUT is TRUE if header ROOT/REL includes a header
# whose name matches REGEX, itself or through the headers of ours it includes (trainhooks/...,
# followed under ROOT), and FALSE otherwise. Only #include lines are read; a header reached twice
# is read once (include cycles end there).
#
# TRAINHOOKS_TENSOR_HEADER: the REGEX for "reaches <ATen/core/Tensor.h>" (it or <ATen/ATen.h>,
# which includes it), as the public-header check asks it (tests/CMakeLists.txt).
set(TRAINHOOKS_TENSOR_HEADER "^(ATen/core/Tensor|ATen/ATen)\\.h$")

function(trainhooks_header_reaches root rel regex out)
  string(MD5 key "${root}|${rel}|${regex}")
  get_property(known GLOBAL PROPERTY _TRAINHOOKS_REACHES_${key} SET)
  if(known)
    get_property(result GLOBAL PROPERTY _TRAINHOOKS_REACHES_${key})
    set(${out} ${result} PARENT_SCOPE)
    return()
  endif()
  # Marked before the includes are followed, so that a cycle back to this header stops.
  set_property(GLOBAL PROPERTY _TRAINHOOKS_REACHES_${key} FALSE)
  set(result FALSE)
  file(STRINGS "${root}/${rel}" lines REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"]")
  foreach(line IN LISTS lines)
    if(NOT line MATCHES "include[ \t]*[<\"]([^>\"]+)[>\"]")
      continue()
    endif()
    set(included "${CMAKE_MATCH_1}")
    if(included MATCHES "${regex}")
      set(result TRUE)
      break()
    endif()
    if(included MATCHES "^trainhooks/" AND EXISTS "${root}/${included}")
      trainhooks_header_reaches("${root}" "${included}" "${regex}" nested)
      if(nested)
        set(result TRUE)
        break()
      endif()
    endif()
  endforeach()
  set_property(GLOBAL PROPERTY _TRAINHOOKS_REACHES_${key} ${result})
  set(${out} ${result} PARENT_SCOPE)
endfunction()
