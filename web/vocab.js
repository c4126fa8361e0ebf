// The vocabulary window: the word list of the sentence's model beside the page, where a click
// on a word puts it into the sentence.

import { models, pageWords, state, t, vocabModel } from './state.js';
import { $ } from './dom.js';
import { PageError, loadVocab } from './api.js';
import { renderError, setFailure } from './status.js';

let vocabShown = null; // {model, n, shown} of the open word list (its words, those shown), for its title

export function renderVocabTitle() {
  const v = vocabShown;
  $('vocab-title').textContent = !v || v.n === null ? t('vocab.loading')
    : state.lang === 'en' && v.shown < v.n - 1 ? t('vocab.title.en', { model: v.model, n: v.n, k: v.shown })
      : t('vocab.title', { model: v.model, n: v.shown });
}

// Opens the word list of the sentence's model beside the page: a click on a word gives it to
// pick, which puts it into the sentence.
export async function openVocab(pick) {
  const model = vocabModel();
  if (!model) return;
  const dlg = $('vocab'), box = $('vocab-words');
  vocabShown = { model, n: null };
  renderVocabTitle();
  if (!dlg.open) dlg.show();
  let words;
  try {
    words = await loadVocab(model);
  } catch (e) {
    dlg.close();
    setFailure(new PageError('err.vocab', { model }, e.message));
    renderError();
    return;
  }
  // In English the words without a Chinese character (state.js pageWords).
  const m = models && models.models.find((x) => x.name === model);
  const shown = pageWords(words, m && m.start_token);
  vocabShown = { model, n: words.length, shown: shown.length };
  renderVocabTitle();
  box.textContent = '';
  for (const w of shown) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip';
    b.textContent = w;
    b.dataset.word = w;
    b.addEventListener('click', () => pick(w));
    box.append(b);
  }
}
