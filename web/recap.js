// The lesson's ending (第 6 章): 本章小结 in a few lines and the chapter's six 自测题. Each question
// links to the step of the guided path that shows its answer, and its answer folds out once the
// student has tried: written at least a few characters in the box under it. What was written
// stays while the page is open, across languages and runs.

import { state, t } from './state.js';
import { $ } from './dom.js';

// The questions in the chapter's order, and the step whose view answers each: Q/K/V as a search
// (实验二), the row of 它 through × V, softmax in the formula, four heads and concat → W^O, the
// causal mask in 实验三, and the note that one head's map is not the model's reasoning (step 3).
export const QUIZ = [
  { n: 1, step: 6 }, { n: 2, step: 2 }, { n: 3, step: 1 }, { n: 4, step: 3 }, { n: 5, step: 7 }, { n: 6, step: 3 },
];
const TRIED = 2; // characters written before the answer may be opened

const typed = new Map(); // question -> what the student wrote
const opened = new Set(); // the questions whose answer is open
let built = null; // the language the list was built in
let go = null; // path.js goStep
let titleOf = null; // the title of step n, in the page's language

export function initRecap(goStep, stepTitle) {
  go = goStep;
  titleOf = stepTitle;
}

function question(q) {
  const li = document.createElement('li');
  li.className = 'quiz-item';
  li.dataset.q = String(q.n);
  const text = document.createElement('p');
  text.className = 'quiz-q';
  text.textContent = t(`quiz.q${q.n}`);
  const link = document.createElement('button');
  link.type = 'button';
  link.className = 'small quiz-go';
  link.dataset.step = String(q.step);
  link.dataset.testid = `quiz-go-${q.n}`;
  link.textContent = t('quiz.go', { n: q.step, title: titleOf ? titleOf(q.step) : '' });
  link.addEventListener('click', () => { if (go) go(q.step); });
  const box = document.createElement('textarea');
  Object.assign(box, { rows: 2, placeholder: t('quiz.placeholder'), value: typed.get(q.n) || '' });
  box.dataset.testid = `quiz-answer-${q.n}`;
  box.setAttribute('aria-label', t('quiz.yours', { n: q.n }));
  const show = document.createElement('button');
  show.type = 'button';
  show.className = 'small quiz-show';
  show.dataset.testid = `quiz-show-${q.n}`;
  show.textContent = t('quiz.show');
  const answer = document.createElement('p');
  answer.className = 'quiz-a';
  answer.dataset.testid = `quiz-a-${q.n}`;
  answer.textContent = t(`quiz.a${q.n}`);
  const sync = () => {
    const tried = box.value.trim().length >= TRIED;
    show.disabled = !tried;
    show.title = tried ? '' : t('quiz.locked');
    answer.hidden = !(tried && opened.has(q.n));
    show.setAttribute('aria-expanded', String(!answer.hidden));
  };
  box.addEventListener('input', () => { typed.set(q.n, box.value); sync(); });
  show.addEventListener('click', () => { opened.add(q.n); sync(); });
  sync();
  li.append(text, link, box, show, answer);
  return li;
}

// The section, under a sentence (the path's step 12 scrolls to it); built again only in a new
// language, so that a box being written in keeps its text and its focus when the view redraws.
export function drawRecap(v) {
  $('recap').hidden = !v.words;
  if (!v.words || built === state.lang) return;
  built = state.lang;
  const list = $('quiz');
  list.textContent = '';
  for (const q of QUIZ) list.append(question(q));
}
