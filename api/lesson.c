/* lesson.c - the built-in model "lesson": api/lesson/lesson.safetensors, written by
 * api/lesson/make_lesson.py and built into the library by api/api.mk (an .incbin), read with
 * the ordinary safetensors loader. Nothing is read from disk at run time. */
#include "api_internal.h"

/* The file's bytes, [api_lesson_file, api_lesson_file_end) (api/api.mk). */
extern const unsigned char api_lesson_file[], api_lesson_file_end[];

api_model *api_model_lesson(api_error *err) {
    api_model *m = api_model_from_safetensors("lesson", api_lesson_file,
                                              (size_t)(api_lesson_file_end - api_lesson_file), err);
    if (m)
        api_model_set_source(m, "builtin");
    return m;
}
