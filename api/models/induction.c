/* induction.c - the built-in model "induction": api/induction/induction.safetensors, a 2-layer
 * attention-only transformer trained by api/induction/train_induction.py on random sequences of
 * words in which a stretch repeats (its layer-0 heads learned to look at the previous token, its
 * layer-1 heads to copy: induction heads), built into the library by api/api.mk (an .incbin) and
 * read with the ordinary safetensors loader as a model of layers. Nothing is read from disk at
 * run time. */
#include "models.h"

/* The file's bytes, [apip_induction_file, apip_induction_file_end) (api/api.mk). */
extern const unsigned char apip_induction_file[], apip_induction_file_end[];

api_model *api_model_induction(api_error *err) {
    api_model *m =
        api_model_from_safetensors("induction", apip_induction_file,
                                   (size_t)(apip_induction_file_end - apip_induction_file), err);
    if (m)
        apip_model_set_source(m, "builtin");
    return m;
}
