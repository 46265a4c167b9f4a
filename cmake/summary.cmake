# trainhooks_summary: TensorBoard event files (TFRecord framing, CRC32C), summaries (scalars,
# histograms, PNG images, text) and the event reader. It depends on LibTorch, protobuf and libpng
# only, never on the rest of trainhooks.
find_package(Protobuf REQUIRED)
find_package(PNG REQUIRED)

# protoc runs with the project root as import path, so the descriptors are registered as
# "proto/<name>.proto" (unlikely to clash with other protos linked into the process) and the
# headers land in <build>/generated/proto/. They stay private to the library.
set(TRAINHOOKS_PROTO_OUT ${PROJECT_BINARY_DIR}/generated)
file(MAKE_DIRECTORY ${TRAINHOOKS_PROTO_OUT})
set(TRAINHOOKS_PROTO_SOURCES)
foreach(name tensor summary event)
  set(proto ${PROJECT_SOURCE_DIR}/proto/${name}.proto)
  set(out ${TRAINHOOKS_PROTO_OUT}/proto/${name}.pb.cc ${TRAINHOOKS_PROTO_OUT}/proto/${name}.pb.h)
  add_custom_command(
    OUTPUT ${out}
    COMMAND protobuf::protoc --cpp_out=${TRAINHOOKS_PROTO_OUT} -I ${PROJECT_SOURCE_DIR} ${proto}
    DEPENDS ${proto} protobuf::protoc
    COMMENT "protoc proto/${name}.proto"
    VERBATIM)
  list(APPEND TRAINHOOKS_PROTO_SOURCES ${out})
endforeach()

file(GLOB_RECURSE TRAINHOOKS_SUMMARY_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/summary/*.cpp)
add_library(trainhooks_summary STATIC ${TRAINHOOKS_SUMMARY_SOURCES} ${TRAINHOOKS_PROTO_SOURCES})
target_include_directories(trainhooks_summary
  PUBLIC ${PROJECT_SOURCE_DIR}/include
  PRIVATE ${PROJECT_SOURCE_DIR}/src ${TRAINHOOKS_PROTO_OUT})
target_link_libraries(trainhooks_summary
  PUBLIC torch Threads::Threads
  PRIVATE fmt::fmt protobuf::libprotobuf PNG::PNG)
trainhooks_target(trainhooks_summary)
