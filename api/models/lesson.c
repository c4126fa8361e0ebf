/* lesson.c - the built-in model "lesson": api/lesson/lesson.safetensors, written by
 * api/lesson/make_lesson.py and built into the library by api/api.mk (an .incbin), read with
 * the ordinary safetensors loader. Nothing is read from disk at run time. */
#include "models.h"

/* The file's bytes, [apip_lesson_file, apip_lesson_file_end) (api/api.mk). */
extern const unsigned char apip_lesson_file[], apip_lesson_file_end[];

api_model *api_model_lesson(api_error *err) {
    api_model *m = api_model_from_safetensors(
        "lesson", apip_lesson_file, (size_t)(apip_lesson_file_end - apip_lesson_file), err);
    if (m)
        apip_model_set_source(m, "builtin");
    return m;
}
