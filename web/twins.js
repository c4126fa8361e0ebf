// The lesson's sentences in both languages: each Chinese sentence of 第 6 章 and its English twin,
// which carries the same relations in the lesson model (api/lesson/twins.json lists them with
// those relations; tests/web checks that the two files agree), the two experiments' words in
// each language, and the chapter's own table of 它's row (第 6 章, 第四步), for step 2.
//
// These are data, not the page's text: the sentences are sent to the API as they are, and a
// sentence preset in English mode sends the English twin.

export const TWINS = {
  c1: {
    zh: '程序员把服务器日志发给同事，因为它记录了错误原因。',
    en: 'The programmer sent the server log to a colleague, because it recorded the cause of the error.',
  },
  c2: {
    zh: '小李把笔记本放进背包，因为它太重了。',
    en: 'Xiao Li put the laptop in the backpack, because it is too heavy.',
  },
  c3: {
    zh: '小王昨天提交了补丁，因为他发现缓存模块在高并发下会返回旧数据。',
    en: 'Xiao Wang submitted a patch yesterday, because he found the cache module would return stale data under high concurrency.',
  },
  c4: {
    zh: '张工把配置文件发给测试同学，因为它包含新的开关。',
    en: 'Engineer Zhang sent the config file to the tester, because it contains a new switch.',
  },
  c5: {
    zh: 'Redis 是一个内存数据库。',
    en: 'Redis is an in-memory database.',
  },
};

// 实验一: the chapter's four candidates for the pronoun of c4, in each language.
export const EXP1_CANDIDATES = {
  zh: ['张工', '配置文件', '测试同学', '新的开关'],
  en: ['Engineer Zhang', 'config file', 'tester', 'new switch'],
};

// 实验三: the word of c5 that is replaced, and what replaces it, in each language.
export const EXP3_WORDS = {
  zh: { word: '数据库', replacement: '缓存' },
  en: { word: 'database', replacement: 'cache' },
};

// The chapter's table of the row of 它 (第 6 章, 第四步: softmax 把分数变成权重): four of its
// words, each with its score and its weight after the softmax; the chapter's "..." stands for the
// other words of the row, which take the rest of the weight. The English words are the twin's.
export const CHAPTER_ROW = {
  preset: 'c1',
  query: { zh: '它', en: 'it' },
  head: 'coreference',
  rows: [
    { zh: '程序员', en: 'programmer', score: 1.1, weight: 0.03 },
    { zh: '服务器日志', en: 'server log', score: 4.8, weight: 0.88 },
    { zh: '同事', en: 'colleague', score: 0.7, weight: 0.02 },
    { zh: '因为', en: 'because', score: -0.2, weight: 0.01 },
  ],
};
