// The vocabulary window: the word list of the sentence's model beside the page, where a click
// on a word puts it into the sentence.

import { t, vocabModel } from './state.js';
import { $ } from './dom.js';
import { PageError, loadVocab } from './api.js';
import { renderError, setFailure } from './status.js';

let vocabShown = null; // {model, n} of the open word list, for its title in either language

export function renderVocabTitle() {
  $('vocab-title').textContent = vocabShown && vocabShown.n !== null
    ? t('vocab.title', { model: vocabShown.model, n: vocabShown.n }) : t('vocab.loading');
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
  vocabShown = { model, n: words.length };
  renderVocabTitle();
  box.textContent = '';
  for (const w of words) {
    const b = document.createElement('button');
    b.type = 'button';
    b.className = 'chip';
    b.textContent = w;
    b.dataset.word = w;
    b.addEventListener('click', () => pick(w));
    box.append(b);
  }
}
